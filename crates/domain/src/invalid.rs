//! The one refusal of what a caller sent, shared by every rule that checks input (requests, the
//! catalog's fields, keys, accounts, usage queries): each edge maps it to its own 400, naming the
//! field at fault.

/// A body or parameter the service refuses, with the name of the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidRequest {
    /// The body field or query parameter at fault, when there is one.
    pub param: Option<String>,
    /// What is wrong, for a human.
    pub message: String,
}

impl InvalidRequest {
    /// A refusal about one field.
    #[must_use]
    pub fn param(param: &str, message: impl Into<String>) -> Self {
        Self { param: Some(param.to_owned()), message: message.into() }
    }

    /// The same refusal about a part of a larger body found at `prefix` (`items[3].body` +
    /// `prompt` = `items[3].body.prompt`; a refusal of the whole part names the part).
    #[must_use]
    pub fn under(self, prefix: &str) -> Self {
        let param = match self.param {
            Some(param) if param.starts_with('[') => format!("{prefix}{param}"),
            Some(param) => format!("{prefix}.{param}"),
            None => prefix.to_owned(),
        };
        Self { param: Some(param), ..self }
    }

    /// A refusal about the whole body.
    #[must_use]
    pub fn body(message: impl Into<String>) -> Self {
        Self { param: None, message: message.into() }
    }
}
