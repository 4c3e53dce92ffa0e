//! Signed links to stored outputs: `/api/v1/files/{job_id}/{index}?expires=<unix s>&sig=<hex>`,
//! answered without an API key so that an `<img>` or `<video>` tag can use them. The signature is
//! an HMAC-SHA256 of `{job_id}/{index}/{expires}` under a key derived with HKDF-SHA256 from
//! `GENJOBS_LINK_SECRET` or, unset, from a random key the service keeps with its store, so that
//! every replica of one store verifies every other's links. The admin token has no part in it: a
//! link gives nothing to test guesses of the token against. Changing the secret voids the links
//! minted before (they live an hour by default anyway). Every read of a job mints fresh links.
//!
//! An uploaded image's link is `/api/v1/uploads/{id}.{ext}?expires=…&sig=…`, signed over
//! `uploads/{id}.{ext}/{expires}` (no job id is `uploads`, so neither kind of link passes for the
//! other) and valid `GENJOBS_UPLOAD_TTL_SECS`: long enough for a job that names it to reach its
//! provider.

use std::cell::OnceCell;
use std::time::Duration;

use actix_web::HttpRequest;
use genjobs_domain::ids::JobId;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use ring::hkdf;
use sha2::Sha256;
use time::OffsetDateTime;

type HmacSha256 = Hmac<Sha256>;

/// What an upload link's signature covers in place of a job id.
const UPLOADS: &str = "uploads";

/// Mints and verifies output links.
#[derive(Clone)]
pub struct LinkSigner {
    /// A 32-byte key, zero-padded to HMAC-SHA256's 64-byte block. HMAC pads a shorter key the
    /// same way, so the signatures are those of the 32-byte key; a full block makes keying
    /// infallible.
    key: [u8; 64],
    ttl: Duration,
    upload_ttl: Duration,
    public_url: Option<String>,
    trust_forwarded: bool,
}

impl std::fmt::Debug for LinkSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSigner")
            .field("ttl", &self.ttl)
            .field("upload_ttl", &self.upload_ttl)
            .field("public_url", &self.public_url)
            .field("trust_forwarded", &self.trust_forwarded)
            .finish_non_exhaustive()
    }
}

impl LinkSigner {
    /// Links valid `ttl` (an upload's a day), signed under a key derived with HKDF from `secret`
    /// (random bytes: the operator's `GENJOBS_LINK_SECRET` or the kept key), rooted at
    /// `public_url` (or, when `None`, at the address each request's connection came to; see
    /// [`LinkSigner::base_of`]).
    #[must_use]
    pub fn new(secret: &[u8], ttl: Duration, public_url: Option<String>) -> Self {
        let mut key = [0u8; 64];
        let derived = hkdf::Salt::new(hkdf::HKDF_SHA256, b"genjobs output links")
            .extract(secret)
            .expand(&[b"hmac-sha256 signing key"], hkdf::HKDF_SHA256)
            .and_then(|okm| okm.fill(&mut key[..32]));
        if derived.is_err() {
            unreachable!("HKDF-SHA256 gives 32 bytes whatever its input");
        }
        Self {
            key,
            ttl,
            upload_ttl: Duration::from_secs(24 * 3600),
            public_url: public_url.map(|url| url.trim_end_matches('/').to_owned()),
            trust_forwarded: false,
        }
    }

    /// The same signer, minting links to uploads valid `upload_ttl`.
    #[must_use]
    pub fn with_upload_ttl(self, upload_ttl: Duration) -> Self {
        Self { upload_ttl, ..self }
    }

    /// The same signer, rooting links without a public URL at the host `Forwarded` /
    /// `X-Forwarded-*` name when `trust` (`GENJOBS_TRUST_FORWARDED`): only behind a proxy that
    /// sets them.
    #[must_use]
    pub fn trusting_forwarded(self, trust: bool) -> Self {
        Self { trust_forwarded: trust, ..self }
    }

    /// The link to upload `name` (`{id}.{ext}`), rooted at `base`, minted at `now`.
    #[must_use]
    pub fn upload_url(&self, base: &str, name: &str, now: OffsetDateTime) -> String {
        let expires =
            (now.unix_timestamp() + i64::try_from(self.upload_ttl.as_secs()).unwrap_or(i64::MAX / 2)).to_string();
        let sig = hex::encode(self.mac(UPLOADS, name, &expires).finalize().into_bytes());
        format!("{base}/api/v1/uploads/{name}?expires={expires}&sig={sig}")
    }

    /// Whether a link to upload `name` carries a valid signature that has not expired at `now`.
    #[must_use]
    pub fn verify_upload(&self, name: &str, expires: &str, signature: &str, now: OffsetDateTime) -> bool {
        self.verify(UPLOADS, name, expires, signature, now)
    }

    /// The links of one answer to `req`, minted at `now`. Their root is worked out from `req`
    /// when the first link is made: most answers (a job still running) link nothing.
    #[must_use]
    pub fn for_request<'a>(&'a self, req: &'a HttpRequest, now: OffsetDateTime) -> OutputLinks<'a> {
        OutputLinks { signer: self, base: Base::Of(req, OnceCell::new()), expires: self.expires_at(now) }
    }

    /// Where links in answers to `req` are rooted: the public URL, or else the address the
    /// connection came to, never a `Host` the client made up (a link in a shared answer, a
    /// webhook, would send its readers wherever the client said); the forwarded host only when
    /// trusted. A stream keeps this rather than its request, which would hold the request's
    /// buffers for the stream's life.
    #[must_use]
    pub fn base_of(&self, req: &HttpRequest) -> String {
        self.public_url.clone().unwrap_or_else(|| {
            if self.trust_forwarded {
                let info = req.connection_info();
                return format!("{}://{}", info.scheme(), info.host());
            }
            let scheme = if req.app_config().secure() { "https" } else { "http" };
            let local = req.conn_data::<LocalAddr>().map_or_else(|| req.app_config().local_addr(), |local| local.0);
            format!("{scheme}://{local}")
        })
    }

    /// Links rooted at `base`, minted at `now`.
    #[must_use]
    pub fn rooted_at(&self, base: String, now: OffsetDateTime) -> OutputLinks<'_> {
        OutputLinks { signer: self, base: Base::Known(base), expires: self.expires_at(now) }
    }

    /// When an output link minted at `now` expires.
    fn expires_at(&self, now: OffsetDateTime) -> i64 {
        now.unix_timestamp() + i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX / 2)
    }

    fn mac(&self, job_id: &str, index: &str, expires: &str) -> HmacSha256 {
        let mut mac = <HmacSha256 as KeyInit>::new(&self.key.into());
        mac.update(format!("{job_id}/{index}/{expires}").as_bytes());
        mac
    }

    /// Whether a link's parts carry a valid signature that has not expired at `now`. The parts
    /// are compared as the link spells them: a job id or index spelled otherwise is not the link
    /// that was signed.
    #[must_use]
    pub fn verify(&self, job_id: &str, index: &str, expires: &str, signature: &str, now: OffsetDateTime) -> bool {
        let (Ok(expires_at), Ok(signature)) = (expires.parse::<i64>(), hex::decode(signature)) else {
            return false;
        };
        expires_at >= now.unix_timestamp() && self.mac(job_id, index, expires).verify_slice(&signature).is_ok()
    }
}

/// The local address of a request's connection, recorded when it is accepted (the server may
/// listen on every interface, and its bound address would then be `0.0.0.0`).
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub std::net::SocketAddr);

/// Records each accepted connection's [`LocalAddr`].
pub fn record_local_addr(connection: &dyn std::any::Any, data: &mut actix_web::dev::Extensions) {
    if let Some(local) =
        connection.downcast_ref::<actix_web::rt::net::TcpStream>().and_then(|tcp| tcp.local_addr().ok())
    {
        data.insert(LocalAddr(local));
    }
}

/// Links minted for one answer.
pub struct OutputLinks<'a> {
    signer: &'a LinkSigner,
    base: Base<'a>,
    expires: i64,
}

/// Where links are rooted: given, or the root of answers to a request, found once when needed.
enum Base<'a> {
    Known(String),
    Of(&'a HttpRequest, OnceCell<String>),
}

impl OutputLinks<'_> {
    /// The link to output `index` of `job_id`.
    #[must_use]
    pub fn url(&self, job_id: JobId, index: usize) -> String {
        let (job, index, expires) = (job_id.to_string(), index.to_string(), self.expires.to_string());
        let sig = hex::encode(self.signer.mac(&job, &index, &expires).finalize().into_bytes());
        let base = match &self.base {
            Base::Known(base) => base,
            Base::Of(req, found) => found.get_or_init(|| self.signer.base_of(req)),
        };
        format!("{base}/api/v1/files/{job}/{index}?expires={expires}&sig={sig}")
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn parts(url: &str) -> (String, String, String, String) {
        let (path, query) = url.split_once('?').unwrap();
        let mut segments = path.rsplit('/');
        let (index, job) = (segments.next().unwrap().to_owned(), segments.next().unwrap().to_owned());
        let mut pairs = query.split('&').map(|p| p.split_once('=').unwrap().1.to_owned());
        (job, index, pairs.next().unwrap(), pairs.next().unwrap())
    }

    #[test]
    fn a_minted_link_verifies_until_it_expires_and_not_after() {
        let signer = LinkSigner::new(b"token", Duration::from_secs(60), Some("https://gen.example/".into()));
        let now = OffsetDateTime::now_utc();
        let job = JobId::new_at(now);
        let url = signer.for_request(&TestRequest::default().to_http_request(), now).url(job, 1);
        assert!(url.starts_with(&format!("https://gen.example/api/v1/files/{job}/1?expires=")), "{url}");
        let (j, i, e, s) = parts(&url);
        assert!(signer.verify(&j, &i, &e, &s, now));
        assert!(signer.verify(&j, &i, &e, &s, now + Duration::from_secs(60)));
        assert!(!signer.verify(&j, &i, &e, &s, now + Duration::from_secs(61)), "expired");
    }

    #[test]
    fn forwarded_headers_root_links_only_when_trusted() {
        let request = TestRequest::default()
            .insert_header(("host", "evil.example"))
            .insert_header(("x-forwarded-host", "evil.example"))
            .insert_header(("x-forwarded-proto", "https"))
            .to_http_request();
        let plain = LinkSigner::new(b"token", Duration::from_secs(60), None);
        assert_eq!(plain.base_of(&request), "http://127.0.0.1:8080");
        assert_eq!(plain.trusting_forwarded(true).base_of(&request), "https://evil.example");
    }

    #[test]
    fn any_change_to_a_link_voids_it() {
        let signer = LinkSigner::new(b"token", Duration::from_secs(60), None);
        let now = OffsetDateTime::now_utc();
        let request = TestRequest::default().insert_header(("host", "localhost:9999")).to_http_request();
        let url = signer.for_request(&request, now).url(JobId::new_at(now), 0);
        assert!(url.starts_with("http://127.0.0.1:8080/api/v1/files/"), "the bound address, not the Host: {url}");
        let (j, i, e, s) = parts(&url);
        let later = (e.parse::<i64>().unwrap() + 3600).to_string();
        assert!(!signer.verify(&j, "1", &e, &s, now), "another index");
        assert!(!signer.verify(&j, &i, &later, &s, now), "a later expiry");
        assert!(!signer.verify(&j.to_uppercase(), &i, &e, &s, now), "another spelling");
        assert!(!signer.verify(&j, &i, &e, "00", now), "a short signature");
        assert!(!LinkSigner::new(b"other token", Duration::from_secs(60), None).verify(&j, &i, &e, &s, now));
    }

    /// The key is HKDF-SHA256 (RFC 5869) of the secret, computed here by the definition: the
    /// extract step, then the first block of the expand step.
    #[test]
    fn the_key_is_derived_with_hkdf() {
        let signer = LinkSigner::new(b"secret", Duration::from_secs(60), None);
        let mut expected = [0u8; 32];
        let prk = <HmacSha256 as KeyInit>::new_from_slice(b"genjobs output links").unwrap().chain_update(b"secret");
        let prk = prk.finalize().into_bytes();
        let okm = <HmacSha256 as KeyInit>::new_from_slice(&prk).unwrap().chain_update(b"hmac-sha256 signing key\x01");
        expected.copy_from_slice(&okm.finalize().into_bytes());
        assert_eq!(signer.key[..32], expected);
        assert_eq!(signer.key[32..], [0u8; 32]);
    }

    #[test]
    fn an_upload_link_lives_its_own_ttl_and_no_output_link_passes_for_one() {
        let signer = LinkSigner::new(b"token", Duration::from_secs(60), None).with_upload_ttl(Duration::from_secs(600));
        let now = OffsetDateTime::now_utc();
        let url = signer.upload_url("https://gen.example", "0190-ab.png", now);
        assert!(url.starts_with("https://gen.example/api/v1/uploads/0190-ab.png?expires="), "{url}");
        let (_, name, e, s) = parts(&url);
        assert!(signer.verify_upload(&name, &e, &s, now + Duration::from_secs(600)));
        assert!(!signer.verify_upload(&name, &e, &s, now + Duration::from_secs(601)), "expired");
        assert!(!signer.verify_upload("0190-ab.jpg", &e, &s, now), "another name");
        let output = signer.for_request(&TestRequest::default().to_http_request(), now).url(JobId::new_at(now), 0);
        let (job, index, e, s) = parts(&output);
        assert!(!signer.verify_upload(&format!("{job}/{index}"), &e, &s, now), "an output link is no upload link");
    }
}
