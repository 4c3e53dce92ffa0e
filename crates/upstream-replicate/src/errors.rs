//! Replicate's error answers: problem details (RFC 7807) as its OpenAPI document and
//! replicate-python's `ReplicateError` (`replicate/exceptions.py`: `type`, `title`, `status`,
//! `detail`, `instance`) read them, with `invalid_fields` on a 422 and `retry_after` on a 429.

use reqwest::Response;
use serde::Deserialize;

use crate::schema::{InvalidField, describe};

/// Longest provider text kept in a job's error message.
const MAX_DETAIL_CHARS: usize = 300;

/// A problem-details answer, read once.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Problem {
    #[serde(skip)]
    pub(crate) status: u16,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    invalid_fields: Vec<InvalidField>,
    /// Seconds to wait, on a 429.
    #[serde(default)]
    pub(crate) retry_after: Option<f64>,
}

impl Problem {
    /// Reads an error answer; a body that is not problem details leaves only the status.
    pub(crate) async fn read(response: Response) -> Self {
        let status = response.status();
        let header_retry = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok());
        let bytes = response.bytes().await.unwrap_or_default();
        let mut problem: Problem = serde_json::from_slice(&bytes).unwrap_or_default();
        problem.status = status.as_u16();
        problem.retry_after = problem.retry_after.or(header_retry);
        problem
    }

    /// For a job's error: the invalid fields when there are, else the detail or the title, with
    /// the status; shortened, never a URL or the token.
    pub(crate) fn message(&self) -> String {
        let text = if self.invalid_fields.is_empty() {
            match (&self.detail, &self.title) {
                (Some(detail), _) | (None, Some(detail)) => format!("{} (HTTP {})", detail.trim(), self.status),
                (None, None) => format!("HTTP {}", self.status),
            }
        } else {
            format!("invalid input: {}", describe(&self.invalid_fields))
        };
        text.chars().take(MAX_DETAIL_CHARS).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_fields_make_the_message() {
        let problem: Problem = serde_json::from_str(
            r#"{"title": "Input validation failed", "status": 422, "detail": "- input.seed: Invalid type",
                "invalid_fields": [{"type": "invalid_type", "field": "input.seed", "description": "Invalid type. Expected: integer, given: string"}]}"#,
        )
        .unwrap_or_default();
        assert_eq!(problem.message(), "invalid input: input.seed: Invalid type. Expected: integer, given: string");
    }

    #[test]
    fn the_detail_or_the_title_explains_other_errors() {
        let detail = Problem {
            status: 404,
            detail: Some("The requested resource could not be found.".into()),
            ..Problem::default()
        };
        assert_eq!(detail.message(), "The requested resource could not be found. (HTTP 404)");
        let title = Problem { status: 403, title: Some("Forbidden".into()), ..Problem::default() };
        assert_eq!(title.message(), "Forbidden (HTTP 403)");
        assert_eq!(Problem { status: 500, ..Problem::default() }.message(), "HTTP 500");
    }
}
