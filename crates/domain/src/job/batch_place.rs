//! Where a job sits in a batch ([`crate::batch`]): a job's part of the batch it belongs to.

use crate::ids::BatchId;

/// Where a job sits in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPlace {
    /// The batch.
    pub batch_id: BatchId,
    /// The client's name for the item, unique in the batch.
    pub custom_id: String,
    /// Whether the item was admitted to be sent: from then on it counts against its owner's
    /// concurrent-job limit until it is final.
    pub admitted: bool,
}
