//! Why an administration subcommand failed: shared by the command line (`cli`) and the
//! operator's `keys` (`keys_cli`), and reported by the client's `keys` (`remote`) as a usage
//! error.

use crate::StartError;

/// An administration subcommand that failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The subcommand needs `DATABASE_URL`.
    #[error("`{0}` works against DATABASE_URL, which is not set")]
    NoDatabase(&'static str),
    /// A flag's value is not valid.
    #[error("{0}")]
    Invalid(String),
    /// The store could not be set up.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The operation failed.
    #[error("{0}")]
    Failed(String),
}
