//! Webhooks as Replicate delivers them: when a prediction created with a `webhook` ends (and its
//! `webhook_events_filter` takes `completed`), its JSON is POSTed there, signed by the Standard
//! Webhooks scheme with the simulator's secret (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature: v1,<base64>`), and tried again with back-off while not answered 2xx, as
//! Replicate retries a final webhook for about a minute.

use std::time::Duration;

use actix_web::web;
use standardwebhooks::Webhook;

use crate::Sim;

/// Deliveries of one event at most.
const MAX_TRIES: u32 = 5;

/// The headers that sign `body` as the delivery `id`, now.
pub(crate) fn signed_headers(secret: &str, id: &str, body: &str) -> Vec<(&'static str, String)> {
    let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let signature = Webhook::new(secret.strip_prefix("whsec_").unwrap_or(secret))
        .and_then(|webhook| webhook.sign(id, timestamp, body.as_bytes()))
        .unwrap_or_default();
    vec![
        (standardwebhooks::HEADER_WEBHOOK_ID, id.to_owned()),
        (standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, timestamp.to_string()),
        (standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature),
    ]
}

/// Delivers the prediction `id`'s end to its webhook, if it asked for one.
pub(crate) async fn deliver(sim: web::Data<Sim>, id: String) {
    let Some((url, body)) = sim.predictions().get(&id).filter(|p| p.notifies_completion()).and_then(|p| {
        let body = p.json(&sim.base_url).to_string();
        p.webhook.clone().map(|url| (url, body))
    }) else {
        return;
    };
    let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    let mut pause = sim.config.webhook_retry;
    for _ in 0..MAX_TRIES {
        let mut request = sim.client.post(&url).header("content-type", "application/json").body(body.clone());
        for (name, value) in signed_headers(&sim.config.webhook_secret, &message_id, &body) {
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(answer) if answer.status().is_success() => return,
            Ok(answer) => tracing::debug!(status = answer.status().as_u16(), %id, "webhook delivery refused"),
            Err(error) => tracing::debug!(%error, %id, "webhook delivery failed"),
        }
        tokio::time::sleep(pause).await;
        pause = pause.saturating_mul(2).min(Duration::from_secs(30));
    }
}
