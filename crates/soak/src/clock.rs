//! The wall clock the soak's clients and processes stamp what they see with.

/// Now, in seconds since the epoch, as the database's timestamps are compared.
#[must_use]
pub fn epoch_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
