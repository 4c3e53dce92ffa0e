//! The `NOTIFY` channels replicas tell each other on: the store publishes on them in its
//! transactions, the listener (`events`) hears them and wakes what each one concerns.

/// The `NOTIFY` channel of changed jobs; the payload is the job id, then the publishing
/// process's origin (see [`Listeners::origin`](crate::Listeners::origin)).
pub const JOBS_CHANNEL: &str = "genjobs_jobs";

/// The `NOTIFY` channel of jobs changed without a new state (progress, a withdrawn submission),
/// which only evicts them from the caches; the payload is as on [`JOBS_CHANNEL`].
pub const JOB_ROWS_CHANNEL: &str = "genjobs_job_rows";

/// The `NOTIFY` channel of watched jobs (someone waits on them); the payload is the job id.
pub const WATCHES_CHANNEL: &str = "genjobs_watches";

/// The `NOTIFY` channel of slots freed at a provider's keys (a job that held one ended); the
/// payload is that job's id.
pub const CAPACITY_CHANNEL: &str = "genjobs_capacity";

/// The `NOTIFY` channel of catalog changes; the payload is the model id.
pub const CATALOG_CHANNEL: &str = "genjobs_catalog";

/// The `NOTIFY` channel of revoked or changed key prefixes.
pub const KEYS_CHANNEL: &str = "genjobs_keys";
