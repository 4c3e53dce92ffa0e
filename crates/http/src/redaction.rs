//! What a request's log line and span show of its path: keys by their prefix only. The routes
//! that name a key (`/api/admin/keys/{prefix}`, `/api/v1/account/keys/{prefix}`) take a whole
//! key as well as its prefix, and a client may paste a key into any path by mistake; logs and
//! traces are read by more people, and kept longer, than a key may be.

use std::borrow::Cow;

use genjobs_domain::ids::KEY_PREFIX_LEN;

/// How every key the service makes begins.
const KEY_START: &str = "gj_";

/// `path` with each segment that may be a key cut to a key's prefix and marked `…`: the segment
/// after a `keys` segment, where routes take a key, and any segment that begins as keys do.
pub(crate) fn loggable_path(path: &str) -> Cow<'_, str> {
    if !path.contains(KEY_START) && !path.contains("/keys/") {
        return Cow::Borrowed(path);
    }
    let mut after_keys = false;
    let segments: Vec<Cow<'_, str>> = path
        .split('/')
        .map(|segment| {
            let shown = if after_keys { prefix_only(segment) } else { loggable_segment(segment) };
            after_keys = segment == "keys";
            shown
        })
        .collect();
    Cow::Owned(segments.join("/"))
}

/// `segment` (a path parameter, say) cut to a key's prefix when it begins as keys do.
pub(crate) fn loggable_segment(segment: &str) -> Cow<'_, str> {
    if segment.starts_with(KEY_START) { prefix_only(segment) } else { Cow::Borrowed(segment) }
}

fn prefix_only(segment: &str) -> Cow<'_, str> {
    match segment.char_indices().nth(KEY_PREFIX_LEN) {
        Some((end, _)) => Cow::Owned(format!("{}…", &segment[..end])),
        None => Cow::Borrowed(segment),
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex, PoisonError};

    use actix_web::test::{TestRequest, call_service, init_service};
    use actix_web::{App, HttpResponse, web};

    use super::*;

    const KEY: &str = "gj_0123456789abcdef0123456789abcdef";

    #[test]
    fn keys_in_paths_are_cut_to_their_prefix() {
        assert_eq!(loggable_path(&format!("/api/admin/keys/{KEY}")), "/api/admin/keys/gj_0123456789ab…");
        assert_eq!(loggable_path(&format!("/api/v1/account/keys/{KEY}")), "/api/v1/account/keys/gj_0123456789ab…");
        assert_eq!(loggable_path(&format!("/api/v1/jobs/{KEY}/stream")), "/api/v1/jobs/gj_0123456789ab…/stream");
        assert_eq!(loggable_path("/api/admin/keys/sk-not-ours-but-long"), "/api/admin/keys/sk-not-ours-but…");
        assert_eq!(loggable_path("/api/admin/keys/gj_0123456789ab"), "/api/admin/keys/gj_0123456789ab", "a prefix");
        assert_eq!(loggable_path("/api/admin/users/u1/keys"), "/api/admin/users/u1/keys");
        assert!(matches!(loggable_path("/api/v1/jobs/0193-abc"), Cow::Borrowed(_)), "no key, no copy");
        assert_eq!(loggable_segment(KEY), "gj_0123456789ab…");
    }

    /// What the log lines written while it lives say.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[actix_web::test]
    async fn the_request_line_of_a_key_route_names_the_key_by_its_prefix() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        let _logging = tracing::subscriber::set_default(subscriber);
        let app = init_service(
            App::new()
                .wrap(actix_web::middleware::from_fn(crate::log_request))
                .route("/api/admin/keys/{prefix}", web::delete().to(HttpResponse::NoContent)),
        )
        .await;
        let request = TestRequest::delete().uri(&format!("/api/admin/keys/{KEY}")).to_request();
        assert_eq!(call_service(&app, request).await.status(), 204);
        let logs = String::from_utf8_lossy(&captured.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned();
        assert!(logs.contains(r#"path="/api/admin/keys/gj_0123456789ab…""#), "{logs}");
        assert!(!logs.contains(KEY), "the whole key was logged: {logs}");
    }
}
