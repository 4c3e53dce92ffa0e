//! What a `webhook_url` must look like before any name is resolved: checked with the rest of a
//! request, so that a malformed one is a 400 naming `webhook_url`.

use crate::address::destination_host;
use crate::invalid::InvalidRequest;

/// Longest `webhook_url`, in characters.
pub const MAX_WEBHOOK_URL_CHARS: usize = 2_048;

/// Checks what can be checked of a `webhook_url` without resolving it: an absolute `http` or
/// `https` URL with a host, no whitespace, at most [`MAX_WEBHOOK_URL_CHARS`]. Whether its host
/// may be called is [`crate::ports::WebhookTransport::check_destination`]'s to say.
///
/// # Errors
/// [`InvalidRequest`] naming `webhook_url`.
pub fn check_webhook_url(url: &str) -> Result<(), InvalidRequest> {
    let refuse = |why: &str| Err(InvalidRequest::param("webhook_url", format!("`webhook_url` {why}")));
    if url.chars().count() > MAX_WEBHOOK_URL_CHARS {
        return refuse(&format!("must be at most {MAX_WEBHOOK_URL_CHARS} characters"));
    }
    if url.chars().any(char::is_whitespace) {
        return refuse("must not contain whitespace");
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return refuse("must be an absolute http or https URL");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return refuse("must be an http or https URL");
    }
    if destination_host(url).is_empty() || rest.starts_with(['/', '?', '#']) {
        return refuse("must name a host");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_refused_before_resolution_when_malformed() {
        for good in ["https://example.com/hook", "http://example.com:8080", "HTTPS://a.b/c?d#e", "http://[::1]:9/x"] {
            assert!(check_webhook_url(good).is_ok(), "{good}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_WEBHOOK_URL_CHARS));
        for bad in ["example.com/hook", "ftp://example.com", "https://", "https:///path", "https://a b", "", &long] {
            let refused = check_webhook_url(bad).unwrap_err();
            assert_eq!(refused.param.as_deref(), Some("webhook_url"), "{bad}");
        }
    }
}
