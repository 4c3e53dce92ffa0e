//! Batches on the wire: the body of `POST /api/v1/batches` read into the domain's
//! [`BatchSubmission`], each item's body validated as its generation endpoint validates one (a
//! refusal names the item: `items[3].body.prompt`), and the views of batches, their items and
//! their result lines.

use std::collections::BTreeMap;

use genjobs_api::{AdminBatch, Batch, BatchCounts, BatchItem, BatchRequest, BatchResult};
use genjobs_domain::batch::{self, BatchView};
use genjobs_domain::catalog::Catalog;
use genjobs_domain::invalid::InvalidRequest;
use genjobs_domain::job::Job as DomainJob;
use genjobs_domain::modality::Modality;
use genjobs_domain::usecases::{BatchItemRequest, BatchSubmission, IdempotencyKey, Submission};
use serde_json::Value;
use serde_path_to_error::Segment;

use super::requests::{fingerprint, generation_request, received_as_is};
use super::responses::{error_view, iso, job_view, outputs, state_view};
use crate::links::OutputLinks;

/// The domain's batch of a `POST /api/v1/batches` body: every item validated before anything
/// is held.
///
/// # Errors
/// [`InvalidRequest`] naming the field at fault, down to the item (`items[3].body.prompt`,
/// `items[0].modality`, `items[2].custom_id`).
pub fn batch_submission(
    body: Value,
    catalog: &Catalog,
    idempotency: Option<IdempotencyKey>,
) -> Result<BatchSubmission, InvalidRequest> {
    if !body.is_object() {
        return Err(InvalidRequest::body("the body must be a JSON object"));
    }
    let idempotency = idempotency.map(|key| (key, fingerprint("batches", &body)));
    // Read from the body itself, not a reference to it: 5,000 items' bodies are moved into the
    // request, not copied.
    let request: BatchRequest = serde_path_to_error::deserialize(body)
        .map_err(|refused| InvalidRequest::param(&path_of(refused.path()), refused.inner().to_string()))?;
    let completion_window_secs = batch::completion_window(request.completion_window_secs)?;
    let metadata = request.metadata.unwrap_or_default();
    batch::check_custom_ids(request.items.iter().map(|item| item.custom_id.as_str()), batch::MAX_BATCH_ITEMS)?;
    batch::check_metadata(&metadata)?;
    let mut items = Vec::with_capacity(request.items.len());
    for (index, item) in request.items.into_iter().enumerate() {
        let modality = match item.modality.as_str() {
            "image" => Modality::Image,
            "video" => Modality::Video,
            _ => {
                return Err(InvalidRequest::param(
                    &format!("items[{index}].modality"),
                    "`modality` must be `image` or `video`",
                ));
            }
        };
        let under = || format!("items[{index}].body");
        if item.body.get("webhook_url").is_some() {
            return Err(InvalidRequest::param(
                &format!("{}.webhook_url", under()),
                "a batch's items take no `webhook_url`: the batch posts one webhook when it ends",
            ));
        }
        let request = generation_request(modality, &item.body, catalog).map_err(|e| e.under(&under()))?;
        let submission = Submission { request, received: received_as_is(item.body), idempotency: None };
        items.push(BatchItemRequest { custom_id: item.custom_id, submission });
    }
    Ok(BatchSubmission {
        id: None,
        max_items: batch::MAX_BATCH_ITEMS,
        items,
        completion_window_secs,
        webhook_url: request.webhook_url,
        metadata,
        idempotency,
    })
}

/// A serde path as the API names fields: `items[3].custom_id`.
fn path_of(path: &serde_path_to_error::Path) -> String {
    let mut named = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => named.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !named.is_empty() {
                    named.push('.');
                }
                named.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    if named.is_empty() { "body".to_owned() } else { named }
}

/// The batch as the API shows it.
#[must_use]
pub fn batch_view(view: &BatchView) -> Batch {
    let counts = view.figures.counts;
    Batch {
        id: view.batch.id.to_string(),
        object: "batch".to_owned(),
        state: view.state().as_str().to_owned(),
        created_at: iso(view.batch.created_at),
        started_at: view.figures.started_at.map(iso),
        finished_at: view.finished_at().map(iso),
        expires_at: iso(view.batch.expires_at),
        counts: BatchCounts {
            total: counts.total,
            queued: counts.queued,
            running: counts.running,
            succeeded: counts.succeeded,
            failed: counts.failed,
            canceled: counts.canceled,
        },
        credits_held: view.figures.credits_held.get(),
        credits_spent: view.figures.credits_spent.get(),
        metadata: view.batch.metadata.clone().into_iter().collect::<BTreeMap<_, _>>(),
    }
}

/// A batch as operators see it: the batch, its owner and its key.
#[must_use]
pub fn admin_batch_view(view: &BatchView) -> AdminBatch {
    AdminBatch {
        batch: batch_view(view),
        user_id: view.batch.user_id.to_string(),
        key_prefix: view.batch.key_prefix.as_ref().map(|prefix| prefix.as_str().to_owned()),
    }
}

/// An item of a batch: its name and its job.
#[must_use]
pub fn batch_item_view(job: &DomainJob, links: &OutputLinks<'_>) -> BatchItem {
    BatchItem { custom_id: custom_id(job), job: job_view(job, links) }
}

/// One line of a batch's results.
#[must_use]
pub fn batch_result_view(job: &DomainJob, links: &OutputLinks<'_>) -> BatchResult {
    BatchResult {
        custom_id: custom_id(job),
        job_id: job.id().to_string(),
        state: state_view(job.state()),
        outputs: outputs(job, links),
        error: job.error().map(error_view),
        credits_actual: job.credits_actual().map(|credits| credits.get()),
    }
}

fn custom_id(job: &DomainJob) -> String {
    job.batch().map(|place| place.custom_id.clone()).unwrap_or_default()
}
