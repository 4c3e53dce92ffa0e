//! The API's JSON shapes, which are `genjobs-api`'s, the very types the service reads and
//! writes; and the events of a job's stream as the client hands them out.

pub use genjobs_api::{
    Account, Batch, BatchCounts, BatchItemBody, BatchRequest, BatchResult, BudgetBody, CancelReceipt, DataView,
    ErrorEnvelope, ErrorObject, Field, FieldOption, ImageRequest, IssuedKey, Job, JobError, JobMeta, JobPage, JobState,
    KeyBudgetView, KeyView, LedgerEntry, LedgerPage, Model, NewKey, Output, OutputMeta, Quote, Receipt, StreamEvent,
    Upload, UsageRow, VideoRequest, WebhookAttempt, WebhookDelivery, WebhookPayload, WebhookSecret,
};

/// The name of a stream event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The job moved on.
    Progress,
    /// The job succeeded; the stream ends.
    Done,
    /// The job failed or was canceled; the stream ends.
    Error,
}

/// One event of a job's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEvent {
    /// Which event.
    pub kind: EventKind,
    /// The event's id, sent back as `Last-Event-ID` on reconnection.
    pub id: Option<String>,
    /// The job as the event tells it.
    pub data: StreamEvent,
}
