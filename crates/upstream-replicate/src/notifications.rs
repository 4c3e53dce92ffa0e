//! Replicate's webhooks: a prediction created with `webhook` and `webhook_events_filter:
//! ["completed"]` is POSTed there when it ends, its body the prediction as `GET` answers it,
//! signed by the Standard Webhooks scheme (`webhook-id`, `webhook-timestamp`, `webhook-signature`
//! = space-separated `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`) with the account's
//! signing secret in `whsec_<base64>` form, as replicate-python's `Webhooks.validate`
//! (`replicate/webhook.py`) and replicate-javascript's `validateWebhook` (`lib/util.js`) verify.
//!
//! The signature is the `standardwebhooks` crate's; the freshness is checked here against the
//! `now` the port passes (the crate would read the clock itself), with the scheme's 300 s.

use std::time::Duration;

use genjobs_domain::ports::{Delivery, NotificationRejected, UpstreamReport};
use standardwebhooks::Webhook;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use crate::prediction::{Phase, Prediction};

/// The path under the gateway's public URL where Replicate delivers.
pub const WEBHOOK_PATH: &str = "/api/upstream/replicate/webhook";

/// A delivery signed further than this from now, either way, is refused.
pub const MAX_SKEW: Duration = Duration::from_secs(300);

/// Webhooks, when the gateway is reachable from Replicate.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Where Replicate delivers: the gateway's public URL and [`WEBHOOK_PATH`].
    pub url: String,
    /// The signing secret, `whsec_<base64>` (`GET /v1/webhooks/default/secret` gives it).
    pub secret: String,
}

impl WebhookConfig {
    /// Deliveries to `public_url`, verified with `secret`.
    #[must_use]
    pub fn new(public_url: &str, secret: impl Into<String>) -> Self {
        Self { url: format!("{}{WEBHOOK_PATH}", public_url.trim_end_matches('/')), secret: secret.into() }
    }
}

/// A secret that is not `whsec_` and base64.
#[derive(Debug, thiserror::Error)]
#[error("the replicate webhook secret is not of the form whsec_<base64>")]
pub struct InvalidSecret;

/// Verifies deliveries with the signing secret.
pub(crate) struct Verifier {
    url: String,
    webhook: Webhook,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Verifier {
    pub(crate) fn new(config: &WebhookConfig) -> Result<Self, InvalidSecret> {
        let encoded = config.secret.strip_prefix("whsec_").ok_or(InvalidSecret)?;
        let webhook = Webhook::new(encoded).map_err(|_| InvalidSecret)?;
        Ok(Self { url: config.url.clone(), webhook })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Verifies a delivery, then reads the prediction it carries.
    pub(crate) fn read(
        &self,
        delivery: &Delivery,
        now: OffsetDateTime,
    ) -> Result<UpstreamReport, NotificationRejected> {
        let delivery_id = self.verify(delivery, now)?;
        let prediction: Prediction = serde_json::from_slice(&delivery.body)
            .map_err(|e| NotificationRejected::Malformed(format!("the body is not a prediction: {e}")))?;
        let outcome = match prediction.phase().map_err(NotificationRejected::Malformed)? {
            Phase::Succeeded => prediction.result(None).map_err(genjobs_domain::ports::ResultFailure::Invalid),
            Phase::Ended(failure) => Err(failure),
            Phase::Running(_) => {
                return Err(NotificationRejected::Malformed(format!(
                    "the prediction is still {:?}: only completed ones are delivered",
                    prediction.status
                )));
            }
        };
        Ok(UpstreamReport { key: prediction.id, outcome, delivery_id: Some(delivery_id) })
    }

    /// The delivery's `webhook-id`, once its signature and timestamp are verified.
    fn verify(&self, delivery: &Delivery, now: OffsetDateTime) -> Result<String, NotificationRejected> {
        let header = |name: &str| {
            delivery.header(name).ok_or_else(|| NotificationRejected::InvalidSignature(format!("no {name} header")))
        };
        let id = header(standardwebhooks::HEADER_WEBHOOK_ID)?;
        let timestamp = header(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP)?;
        let signatures = header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE)?;
        let signed_at: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| NotificationRejected::InvalidSignature("the timestamp is not Unix seconds".into()))?;
        if now.unix_timestamp().abs_diff(signed_at) > MAX_SKEW.as_secs() {
            return Err(NotificationRejected::InvalidSignature(
                "the timestamp is more than 300 s away from now".into(),
            ));
        }
        let expected = self
            .webhook
            .sign(id, signed_at, &delivery.body)
            .map_err(|_| NotificationRejected::InvalidSignature("the body is not UTF-8 text".into()))?;
        let expected = expected.split_once(',').map_or("", |(_, signature)| signature).as_bytes();
        let matches = signatures
            .split(' ')
            .filter_map(|entry| entry.split_once(','))
            .any(|(version, signature)| version == "v1" && bool::from(signature.as_bytes().ct_eq(expected)));
        if matches {
            Ok(id.to_owned())
        } else {
            Err(NotificationRejected::InvalidSignature("no v1 signature of the delivery matches the secret".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test: a failed unwrap is a failed test")]

    use super::*;

    const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

    fn signed(body: &str, at: i64) -> Delivery {
        let signature = Webhook::new("C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap().sign("msg_1", at, body.as_bytes());
        Delivery {
            provider: "replicate".into(),
            headers: vec![
                ("webhook-id".into(), "msg_1".into()),
                ("webhook-timestamp".into(), at.to_string()),
                ("webhook-signature".into(), format!("v1,bm90IHRoaXMgb25l {}", signature.unwrap())),
            ],
            body: body.as_bytes().to_vec(),
        }
    }

    fn verifier() -> Verifier {
        Verifier::new(&WebhookConfig::new("https://gen.example/", SECRET)).unwrap()
    }

    #[test]
    fn a_signed_fresh_delivery_is_read() {
        let now = OffsetDateTime::now_utc();
        let body = r#"{"id": "p1", "status": "succeeded", "output": "https://r/out.png"}"#;
        let report = verifier().read(&signed(body, now.unix_timestamp() - 299), now).unwrap();
        assert_eq!((report.key.as_str(), report.delivery_id.as_deref()), ("p1", Some("msg_1")));
        assert_eq!(report.outcome.unwrap().outputs[0].url, "https://r/out.png");
        assert_eq!(verifier().url(), "https://gen.example/api/upstream/replicate/webhook");
    }

    #[test]
    fn stale_forged_and_unsigned_deliveries_are_refused() {
        let now = OffsetDateTime::now_utc();
        let body = r#"{"id": "p1", "status": "failed", "error": "boom"}"#;
        let refused = |delivery: Delivery| {
            matches!(verifier().read(&delivery, now), Err(NotificationRejected::InvalidSignature(_)))
        };
        assert!(refused(signed(body, now.unix_timestamp() - 301)), "stale");
        assert!(refused(signed(body, now.unix_timestamp() + 301)), "from the future");
        let mut forged = signed(body, now.unix_timestamp());
        forged.body = br#"{"id": "p2", "status": "failed", "error": "boom"}"#.to_vec();
        assert!(refused(forged), "another body");
        let mut unsigned = signed(body, now.unix_timestamp());
        unsigned.headers.retain(|(name, _)| name != "webhook-signature");
        assert!(refused(unsigned));
        assert!(Verifier::new(&WebhookConfig::new("https://x", "C2FVsBQIhrscChlQIMV+b5sSYspob7oD")).is_err());
        assert!(Verifier::new(&WebhookConfig::new("https://x", "whsec_not base64!")).is_err());
    }

    #[test]
    fn a_delivery_that_is_not_a_completed_prediction_is_malformed() {
        let now = OffsetDateTime::now_utc();
        let read = |body: &str| verifier().read(&signed(body, now.unix_timestamp()), now);
        assert!(matches!(read(r#"{"id": "p1", "status": "processing"}"#), Err(NotificationRejected::Malformed(_))));
        assert!(matches!(read("[1, 2]"), Err(NotificationRejected::Malformed(_))));
        let failed = read(r#"{"id": "p1", "status": "failed", "error": "boom"}"#).unwrap();
        assert_eq!(failed.outcome, Err(genjobs_domain::ports::ResultFailure::Failed("boom".into())));
    }
}
