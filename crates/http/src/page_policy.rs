//! The Content-Security-Policy of the service's own pages (the playground, the account page, the
//! console and `/docs`), which keep an API key or the admin token in the browser. Only the page's own
//! inline script and style run (allowed by their SHA-256, computed from the page itself so that an
//! edit cannot forget them), scripts and styles come from this origin only, requests go to this origin only, and no other
//! site may frame the page (`frame-ancestors 'none'`, against clickjacking). Outputs are images
//! and videos from the service's links or the provider's media hosts, so media may come from
//! anywhere: an image or video runs no script.

use base64::Engine;
use sha2::{Digest, Sha256};

/// The policy of `page`: `'self'` and the hashes of its inline `<script>` and `<style>` blocks.
pub(crate) fn strict_policy(page: &str) -> String {
    let hashes = |tag: &str| {
        inline_blocks(page, tag)
            .into_iter()
            .map(|block| {
                format!(" 'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(block)))
            })
            .collect::<String>()
    };
    format!(
        "default-src 'none'; script-src 'self'{}; style-src 'self'{}; connect-src 'self'; \
         img-src * data: blob:; media-src * data: blob:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
        hashes("script"),
        hashes("style"),
    )
}

/// The text inside each `<tag>…</tag>` of `page` whose opening tag has no attribute (an inline
/// block; `<script src=…>` loads a file instead).
fn inline_blocks<'a>(page: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    page.match_indices(open.as_str())
        .filter_map(|(at, _)| {
            let body = &page[at + open.len()..];
            body.find(close.as_str()).map(|end| &body[..end])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_the_pages_own_inline_blocks_and_no_framing() {
        let page = "<style>a{}</style><script src=\"/x.js\"></script><script>go()</script>";
        let policy = strict_policy(page);
        let digest = |text: &str| base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text));
        assert!(policy.contains(&format!("script-src 'self' 'sha256-{}';", digest("go()"))), "{policy}");
        assert!(policy.contains(&format!("style-src 'self' 'sha256-{}';", digest("a{}"))), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'") && policy.starts_with("default-src 'none'"));
    }
}
