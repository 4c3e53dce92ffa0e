//! fal's webhooks: where fal delivers the end of a request, and how a delivery is trusted.
//!
//! A delivery carries `X-Fal-Webhook-Request-Id`, `-User-Id`, `-Timestamp` (Unix seconds) and
//! `-Signature` (hex): an ED25519 signature, by one of the keys of fal's JWKS, of the request id,
//! the user id, the timestamp and the hex SHA-256 of the raw body, joined by `\n`. With the
//! operator's fal user id configured, a delivery for another account is refused. The keys are
//! fetched once and kept a day; a delivery no kept key verifies makes the adapter fetch them
//! again (at most once per [`WebhookConfig::min_refetch`], so that forged deliveries cannot make
//! it hammer fal), which is how a rotated key is picked up.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, VerifyingKey};
use genjobs_domain::ports::{Delivery, NotificationRejected, ResultFailure, UpstreamReport, UpstreamResult};
use reqwest::{Client, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use tokio::sync::Mutex;

use crate::errors::{FalError, first_validation_error, is_refusal};
use crate::outputs::read_outputs;

/// fal's published JWKS.
pub const FAL_JWKS_URL: &str = "https://rest.alpha.fal.ai/.well-known/jwks.json";

/// The path under the gateway's public URL where fal delivers.
pub const WEBHOOK_PATH: &str = "/api/upstream/fal/webhook";

/// A delivery signed further than this from now, either way, is refused.
pub const MAX_SKEW: Duration = Duration::from_secs(300);

/// How long fetched keys are trusted before they are fetched again.
const KEYS_TTL: Duration = Duration::from_secs(24 * 3600);

/// Webhooks, when the gateway is reachable from fal.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where fal delivers: the gateway's public URL and [`WEBHOOK_PATH`].
    pub url: String,
    /// Where fal's signing keys are published.
    pub jwks_url: String,
    /// Least time between two fetches of the keys.
    pub min_refetch: Duration,
    /// The operator's fal user id (`GENJOBS_FAL_USER_ID`): set, a delivery signed for another
    /// fal account is refused, however well signed (fal signs every account's deliveries with
    /// the same keys).
    pub user_id: Option<String>,
}

impl WebhookConfig {
    /// Deliveries to `public_url`, verified with the keys at `jwks_url`.
    #[must_use]
    pub fn new(public_url: &str, jwks_url: impl Into<String>) -> Self {
        Self {
            url: format!("{}{WEBHOOK_PATH}", public_url.trim_end_matches('/')),
            jwks_url: jwks_url.into(),
            min_refetch: Duration::from_secs(10),
            user_id: None,
        }
    }
}

/// Verifies deliveries with fal's keys, fetched and kept.
#[derive(Debug)]
pub(crate) struct Verifier {
    config: WebhookConfig,
    keys: Mutex<Option<KeySet>>,
}

#[derive(Debug, Clone)]
struct KeySet {
    keys: Vec<VerifyingKey>,
    fetched_at: Instant,
}

#[derive(Deserialize)]
struct Jwks {
    keys: Vec<Jwk>,
}

#[derive(Deserialize)]
struct Jwk {
    #[serde(default)]
    kty: String,
    #[serde(default)]
    crv: String,
    #[serde(default)]
    x: String,
}

/// A webhook's body: `{request_id, gateway_request_id, status, payload, error, payload_error}`.
#[derive(Deserialize)]
struct WebhookBody {
    request_id: String,
    status: String,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    payload_error: Option<String>,
}

impl Verifier {
    pub(crate) fn new(config: WebhookConfig) -> Self {
        Self { config, keys: Mutex::new(None) }
    }

    pub(crate) fn config(&self) -> &WebhookConfig {
        &self.config
    }

    /// Verifies a delivery, then reads it.
    pub(crate) async fn read(
        &self,
        client: &Client,
        delivery: &Delivery,
        now: OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        let request_id = self.verify(client, delivery, now).await?;
        let body: WebhookBody = serde_json::from_slice(&delivery.body)
            .map_err(|e| NotificationRejected::Malformed(format!("the body is not a fal webhook: {e}")))?;
        if body.request_id != request_id {
            return Err(NotificationRejected::Malformed("the body names another request than its headers".into()));
        }
        let outcome = match body.status.as_str() {
            "OK" => match (body.payload, body.payload_error) {
                (_, Some(reason)) => {
                    Err(ResultFailure::Transient(format!("fal could not deliver the payload: {reason}")))
                }
                (Some(payload), None) => {
                    read_outputs(&payload).map(UpstreamResult::from).map_err(ResultFailure::Invalid)
                }
                (None, None) => Err(ResultFailure::Invalid("the webhook carries no payload".into())),
            },
            "ERROR" => Err(failure(body.payload.as_ref(), body.error)),
            other => return Err(NotificationRejected::Malformed(format!("unknown status {other:?}"))),
        };
        Ok(UpstreamReport { key: body.request_id, outcome, delivery_id: None })
    }

    /// Checks the headers and the signature; returns the signed request id.
    async fn verify(
        &self,
        client: &Client,
        delivery: &Delivery,
        now: OffsetDateTime,
    ) -> Result<String, NotificationRejected> {
        let header = |name: &str| {
            delivery.header(name).ok_or_else(|| NotificationRejected::InvalidSignature(format!("no {name} header")))
        };
        let (request_id, user_id) = (header("x-fal-webhook-request-id")?, header("x-fal-webhook-user-id")?);
        if self.config.user_id.as_deref().is_some_and(|operator| operator != user_id) {
            return Err(NotificationRejected::InvalidSignature("the delivery is for another fal account".into()));
        }
        let timestamp = header("x-fal-webhook-timestamp")?;
        let signature = header("x-fal-webhook-signature")?;
        let signed_at: i64 = timestamp
            .parse()
            .map_err(|_| NotificationRejected::InvalidSignature("the timestamp is not Unix seconds".into()))?;
        if now.unix_timestamp().abs_diff(signed_at) > MAX_SKEW.as_secs() {
            return Err(NotificationRejected::InvalidSignature(
                "the timestamp is more than 300 s away from now".into(),
            ));
        }
        let signature = hex::decode(signature)
            .ok()
            .and_then(|bytes| Signature::from_slice(&bytes).ok())
            .ok_or_else(|| NotificationRejected::InvalidSignature("the signature is not 64 bytes of hex".into()))?;
        let digest = hex::encode(Sha256::digest(&delivery.body));
        let message = format!("{request_id}\n{user_id}\n{timestamp}\n{digest}");
        let signed_by =
            |keys: &KeySet| keys.keys.iter().any(|key| key.verify_strict(message.as_bytes(), &signature).is_ok());
        let kept = self.keys(client, false).await?;
        if signed_by(&kept) {
            return Ok(request_id.to_owned());
        }
        if kept.fetched_at.elapsed() >= self.config.min_refetch && signed_by(&self.keys(client, true).await?) {
            return Ok(request_id.to_owned());
        }
        Err(NotificationRejected::InvalidSignature("no key of fal's JWKS signed this delivery".into()))
    }

    /// The kept keys, fetched first when there are none, they are a day old, or `refresh`.
    async fn keys(&self, client: &Client, refresh: bool) -> Result<KeySet, NotificationRejected> {
        let mut kept = self.keys.lock().await;
        match kept.as_ref() {
            Some(keys) if !refresh && keys.fetched_at.elapsed() < KEYS_TTL => return Ok(keys.clone()),
            Some(keys) if refresh && keys.fetched_at.elapsed() < self.config.min_refetch => return Ok(keys.clone()),
            _ => {}
        }
        match self.fetch(client).await {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "fetched fal's webhook keys");
                let fresh = KeySet { keys, fetched_at: Instant::now() };
                *kept = Some(fresh.clone());
                Ok(fresh)
            }
            Err(reason) => {
                tracing::warn!(%reason, "could not fetch fal's webhook keys");
                kept.clone().ok_or(NotificationRejected::Unavailable(reason))
            }
        }
    }

    async fn fetch(&self, client: &Client) -> Result<Vec<VerifyingKey>, String> {
        let response = client.get(&self.config.jwks_url).send().await.map_err(|_| "the JWKS could not be fetched")?;
        if response.status() != StatusCode::OK {
            return Err(format!("the JWKS answered HTTP {}", response.status().as_u16()));
        }
        let jwks: Jwks = response.json().await.map_err(|_| "the JWKS is not a JSON key set")?;
        let keys: Vec<VerifyingKey> = jwks
            .keys
            .iter()
            .filter(|k| k.kty == "OKP" && k.crv == "Ed25519")
            .filter_map(|k| URL_SAFE_NO_PAD.decode(&k.x).ok())
            .filter_map(|x| <[u8; 32]>::try_from(x.as_slice()).ok())
            .filter_map(|x| VerifyingKey::from_bytes(&x).ok())
            .collect();
        if keys.is_empty() { Err("the JWKS holds no Ed25519 key".into()) } else { Ok(keys) }
    }
}

/// An `ERROR` delivery as a job's failure: refused, with the first validation error's message,
/// when the payload carries validation details (`detail[].loc`, fal's 422 shape) or fal's
/// category says the input was refused; failed otherwise, with fal's detail or its `error`.
fn failure(payload: Option<&Value>, error: Option<String>) -> ResultFailure {
    let fal = FalError::of_body(StatusCode::UNPROCESSABLE_ENTITY, payload, None);
    if fal.content_refused {
        return ResultFailure::ContentRefused(fal.message());
    }
    if let Some(first) = first_validation_error(payload) {
        return ResultFailure::Rejected(first);
    }
    let message = match (&fal.detail, error) {
        (None, Some(error)) if fal.error_type.is_none() => error,
        _ => fal.message(),
    };
    if is_refusal(fal.error_type.as_deref()) {
        ResultFailure::Rejected(message)
    } else {
        ResultFailure::Failed(message)
    }
}
