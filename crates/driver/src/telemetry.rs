//! What the driver counts, through the `metrics` facade (the binary installs the recorder).

use std::time::Duration;

use metrics::histogram;

/// How late a job's step started after its due time.
pub(crate) fn driver_lag(lag: Duration) {
    histogram!("genjobs_driver_lag_seconds").record(lag.as_secs_f64());
}
