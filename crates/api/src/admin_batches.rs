//! Every user's batches as operators see them: the batch resource and who stands behind it, and
//! pages of them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::batches::Batch;

/// A batch as `GET /api/admin/batches` lists it: the batch resource plus its owner and the key
/// it was submitted with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminBatch {
    /// The batch as its owner sees it.
    #[serde(flatten)]
    pub batch: Batch,
    /// Its owner.
    pub user_id: String,
    /// The prefix of the key it was submitted with; null when none was recorded.
    pub key_prefix: Option<String>,
}

/// A page of every user's batches, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AdminBatchPage {
    /// The batches.
    pub data: Vec<AdminBatch>,
    /// The `before` of the next page, or null.
    pub next: Option<String>,
}
