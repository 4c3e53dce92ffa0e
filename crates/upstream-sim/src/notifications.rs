//! Webhooks as fal delivers them: when a request submitted with `fal_webhook` ends, the simulator
//! POSTs `{request_id, gateway_request_id, status, payload, error, payload_error}` there, signed
//! with its own ED25519 key (published at `/.well-known/jwks.json`) exactly as fal signs, and
//! tries a delivery that is not answered 2xx again with back-off, up to 10 times.
//!
//! Directives in the prompt change a delivery's fate: `[sim:webhook-drop]` sends nothing,
//! `[sim:webhook-duplicate]` sends it twice, `[sim:webhook-delay=MS]` sends it MS milliseconds
//! late, `[sim:webhook-corrupt]` sends it with a signature that does not verify.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use actix_web::{HttpResponse, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signer, SigningKey};
#[cfg(feature = "stats")]
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::requests::{DeliveryFaults, SimRequest, output};
use crate::{Sim, refusal};

/// Deliveries of one request at most, as fal's 10 tries.
const MAX_TRIES: u32 = 10;
/// How often a request that waits for a slot of its key is looked at again, for its webhook.
const SLOT_LOOK: Duration = Duration::from_millis(50);

/// The user id the simulator signs as.
pub(crate) const SIM_USER_ID: &str = "sim-user";

/// The simulator's signing key, which tests may rotate.
pub(crate) struct Keys {
    current: Mutex<SigningKey>,
}

impl Keys {
    pub(crate) fn generate() -> Self {
        Self { current: Mutex::new(new_key()) }
    }

    fn current(&self) -> SigningKey {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Replaces the key: deliveries are signed with the new one, and the JWKS publishes only it.
    #[cfg(feature = "stats")]
    pub(crate) fn rotate(&self) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = new_key();
    }

    /// The JWKS document, as fal publishes its own.
    pub(crate) fn jwks(&self) -> HttpResponse {
        let x = URL_SAFE_NO_PAD.encode(self.current().verifying_key().as_bytes());
        HttpResponse::Ok().json(
            json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "use": "sig", "alg": "EdDSA", "kid": "sim"}]}),
        )
    }

    /// The headers of a delivery of `body` for `request_id`, signed now.
    pub(crate) fn signed_headers(&self, request_id: &str, body: &[u8], corrupt: bool) -> Vec<(&'static str, String)> {
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp().to_string();
        let digest = hex::encode(Sha256::digest(body));
        let message = format!("{request_id}\n{SIM_USER_ID}\n{timestamp}\n{digest}");
        let mut signature = self.current().sign(message.as_bytes()).to_bytes();
        if corrupt {
            signature[0] ^= 0x01;
        }
        vec![
            ("x-fal-webhook-request-id", request_id.to_owned()),
            ("x-fal-webhook-user-id", SIM_USER_ID.to_owned()),
            ("x-fal-webhook-timestamp", timestamp),
            ("x-fal-webhook-signature", hex::encode(signature)),
        ]
    }
}

fn new_key() -> SigningKey {
    let mut seed = [0u8; 32];
    seed[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    seed[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    SigningKey::from_bytes(&seed)
}

/// A webhook's body for a request that ended with `result` (`Ok(payload)` or `Err((error,
/// payload))`).
pub(crate) fn body(request_id: &str, result: Result<Value, (String, Value)>) -> Value {
    match result {
        Ok(payload) => json!({
            "request_id": request_id, "gateway_request_id": request_id, "status": "OK",
            "payload": payload, "error": null, "payload_error": null,
        }),
        Err((error, payload)) => json!({
            "request_id": request_id, "gateway_request_id": request_id, "status": "ERROR",
            "payload": payload, "error": error, "payload_error": null,
        }),
    }
}

/// One request's end, to deliver.
pub(crate) struct Delivery {
    pub(crate) url: String,
    pub(crate) request_id: String,
    pub(crate) body: Value,
    pub(crate) faults: DeliveryFaults,
}

/// Delivers as the faults say, trying again after `retry` (doubled each time) while it is not
/// answered 2xx; `answered` hears each answer's status (0: no answer).
pub(crate) async fn deliver(
    client: &reqwest::Client,
    keys: &Keys,
    delivery: Delivery,
    retry: Duration,
    answered: impl Fn(u16),
) {
    let Delivery { url, request_id, body, faults } = delivery;
    if faults.drop {
        return;
    }
    tokio::time::sleep(Duration::from_millis(faults.delay_ms)).await;
    let bytes = body.to_string().into_bytes();
    let copies = if faults.duplicate { 2 } else { 1 };
    for _ in 0..copies {
        let mut pause = retry;
        for _ in 0..MAX_TRIES {
            let mut post = client.post(&url).header("content-type", "application/json").body(bytes.clone());
            for (name, value) in keys.signed_headers(&request_id, &bytes, faults.corrupt) {
                post = post.header(name, value);
            }
            let status = post.send().await.map_or(0, |response| response.status().as_u16());
            answered(status);
            if (200..300).contains(&status) {
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(60));
        }
    }
}

/// The query of `/_sim/sign`.
#[cfg(feature = "stats")]
#[derive(Deserialize)]
pub(crate) struct SignQuery {
    request_id: String,
}

/// The headers that sign a body as a delivery for a request, as a JSON object.
#[cfg(feature = "stats")]
pub(crate) async fn sign(sim: web::Data<Sim>, query: web::Query<SignQuery>, body: web::Bytes) -> HttpResponse {
    let headers: serde_json::Map<String, Value> = sim
        .keys
        .signed_headers(&query.request_id, &body, false)
        .into_iter()
        .map(|(name, value)| (name.to_owned(), Value::String(value)))
        .collect();
    HttpResponse::Ok().json(headers)
}

/// Delivers the end of a request to its webhook when it ends.
pub(crate) async fn notify_at_end(
    sim: web::Data<Sim>,
    url: String,
    request_id: String,
    files: String,
    ends_in: Duration,
) {
    tokio::time::sleep(ends_in).await;
    // A request that waited for a slot of its key ends later than it would have.
    loop {
        let remaining = sim.state.requests().all.get(&request_id).map(SimRequest::remaining);
        match remaining {
            None => return,
            Some(Some(left)) if left.is_zero() => break,
            Some(Some(left)) => tokio::time::sleep(left).await,
            Some(None) => tokio::time::sleep(SLOT_LOOK).await,
        }
    }
    let ended = {
        let requests = sim.state.requests();
        requests.all.get(&request_id).map(|request| (webhook_result(request, &files), request.directives.webhook))
    };
    let Some((result, faults)) = ended else { return };
    let body = body(&request_id, result);
    let counted = |status: u16| {
        sim.state.count("webhook", Some(&request_id));
        if (200..300).contains(&status) {
            sim.state.count("webhook_accepted", Some(&request_id));
        }
    };
    let delivery = Delivery { url, request_id: request_id.clone(), body, faults };
    deliver(&sim.client, &sim.keys, delivery, sim.config.webhook_retry, counted).await;
}

/// How a request ended, as its webhook reports it: the payload, or fal's error and its payload.
fn webhook_result(request: &SimRequest, files: &str) -> Result<Value, (String, Value)> {
    let d = &request.directives;
    if request.canceled {
        return Err(("Request was cancelled".into(), json!({"detail": "Request was cancelled"})));
    }
    if let Some(violations) = &request.invalid {
        return Err(("Invalid status code: 422".into(), json!({"detail": violations})));
    }
    if d.reject {
        return Err(("Invalid status code: 422".into(), refusal()));
    }
    if d.webhook_error {
        return Err(("Invalid status code: 500".into(), Value::Null));
    }
    if d.fail {
        return Err(("Invalid status code: 500".into(), json!({"detail": "the model crashed while generating"})));
    }
    if d.error_status {
        let payload =
            json!({"detail": "the runner disconnected while generating", "error_type": "runner_disconnected"});
        return Err(("the runner disconnected while generating".into(), payload));
    }
    if d.malformed {
        return Ok(json!({"images": "not a list", "video": 7}));
    }
    Ok(output(request, files))
}
