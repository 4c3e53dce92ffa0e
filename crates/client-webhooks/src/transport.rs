//! Posting webhooks: where they may go, how each attempt is signed and sent. An attempt's
//! outcome names only the class of a failure ([`AttemptFailure`]): the user who reads the
//! attempts listing chose the destination, and the operating system's words ("connection
//! refused" against "no route to host") would make the service a port scanner. The detail goes
//! to the log, with the webhook's id.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use genjobs_domain::address::is_public;
use genjobs_domain::ports::{AttemptFailure, AttemptOutcome, OutgoingWebhook, WebhookTransport};
use genjobs_output_store::{NoPublicAddress, PublicResolver};
use standardwebhooks::Webhook;

/// How attempts are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportSettings {
    /// How long an attempt waits for the receiver's answer, connection included.
    pub timeout: Duration,
    /// Whether destinations on private, loopback and link-local addresses are allowed
    /// (`GENJOBS_WEBHOOK_ALLOW_PRIVATE`): for deployments whose clients live on the same network.
    pub allow_private: bool,
}

impl Default for TransportSettings {
    fn default() -> Self {
        Self { timeout: Duration::from_secs(10), allow_private: false }
    }
}

/// Sends client webhooks over HTTP.
#[derive(Debug, Clone)]
pub struct HttpWebhookTransport {
    client: reqwest::Client,
    settings: TransportSettings,
}

impl HttpWebhookTransport {
    /// A transport with `settings`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built (no TLS roots).
    pub fn new(settings: TransportSettings) -> reqwest::Result<Self> {
        let allow_private = settings.allow_private;
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would resolve names itself, past the resolver's check.
            .no_proxy()
            .dns_resolver(Arc::new(PublicResolver::new(move |_| allow_private)))
            .user_agent(concat!("genjobs-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { client, settings })
    }

    fn allows(&self, ip: IpAddr) -> bool {
        self.settings.allow_private || is_public(ip)
    }

    /// The URL's host when it may be called as written: `Err` for a literal address that is
    /// not allowed.
    fn parse(&self, url: &str) -> Result<url::Url, String> {
        let parsed = url::Url::parse(url).map_err(|_| "`webhook_url` is not a valid URL".to_owned())?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("`webhook_url` must be an http or https URL".into());
        }
        match parsed.host() {
            None => Err("`webhook_url` must name a host".into()),
            Some(url::Host::Ipv4(ip)) if !self.allows(IpAddr::V4(ip)) => Err(refused()),
            Some(url::Host::Ipv6(ip)) if !self.allows(IpAddr::V6(ip)) => Err(refused()),
            Some(_) => Ok(parsed),
        }
    }
}

/// The refusal of an address not allowed, by its class only: the address itself is not repeated,
/// for a URL's literal address as for one its host resolved to.
fn refused() -> String {
    "`webhook_url` points at a private or reserved address, which webhooks may not reach".to_owned()
}

#[async_trait]
impl WebhookTransport for HttpWebhookTransport {
    async fn check_destination(&self, url: &str) -> Result<(), String> {
        let parsed = self.parse(url)?;
        let Some(url::Host::Domain(name)) = parsed.host() else { return Ok(()) };
        if self.settings.allow_private {
            return Ok(());
        }
        let port = parsed.port_or_known_default().unwrap_or(443);
        // The refusals name the class of the reason and never an address the name resolved
        // to: a client may not map the service's network through its answers.
        let unresolved = || format!("the host of `webhook_url`, {name}, cannot be resolved");
        let found: Vec<SocketAddr> = tokio::net::lookup_host((name, port)).await.map_err(|_| unresolved())?.collect();
        if found.is_empty() {
            return Err(unresolved());
        }
        if found.iter().any(|a| !is_public(a.ip())) {
            return Err(format!(
                "the host of `webhook_url`, {name}, resolves to a private or reserved address, which webhooks may not reach"
            ));
        }
        Ok(())
    }

    async fn send(&self, webhook: OutgoingWebhook) -> AttemptOutcome {
        let failed = |status: Option<u16>, failure: AttemptFailure, detail: &str| {
            tracing::info!(webhook_id = %webhook.id, class = failure.as_str(), %detail, "webhook attempt failed");
            AttemptOutcome::failed(status, failure)
        };
        let url = match self.parse(&webhook.url) {
            Ok(url) => url,
            Err(why) => return failed(None, AttemptFailure::RefusedAddress, &why),
        };
        let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
        let signature = match Webhook::new(&webhook.secret).and_then(|w| w.sign(&webhook.id, timestamp, &webhook.body))
        {
            Ok(signature) => signature,
            Err(e) => return failed(None, AttemptFailure::ConnectFailed, &format!("cannot sign: {e}")),
        };
        let sent = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(standardwebhooks::HEADER_WEBHOOK_ID, &webhook.id)
            .header(standardwebhooks::HEADER_WEBHOOK_TIMESTAMP, timestamp.to_string())
            .header(standardwebhooks::HEADER_WEBHOOK_SIGNATURE, signature)
            .body(webhook.body.clone())
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => {
                AttemptOutcome { status: Some(answer.status().as_u16()), error: None }
            }
            Ok(answer) => {
                let status = answer.status();
                failed(Some(status.as_u16()), AttemptFailure::HttpStatus, &format!("answered {status}"))
            }
            Err(e) if e.is_timeout() => failed(None, AttemptFailure::Timeout, &describe(&e)),
            Err(e) if refused_by_resolver(&e) => failed(None, AttemptFailure::RefusedAddress, &describe(&e)),
            Err(e) => failed(None, AttemptFailure::ConnectFailed, &describe(&e)),
        }
    }
}

/// Whether the connection was not made because the destination's name resolves to no address
/// the service may call.
fn refused_by_resolver(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source()).any(|cause| cause.is::<NoPublicAddress>())
}

/// An error with its causes, which carry what happened (refused, reset, a private address).
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    std::iter::successors(Some(e), |e| e.source()).map(ToString::to_string).collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport(allow_private: bool) -> HttpWebhookTransport {
        HttpWebhookTransport::new(TransportSettings { allow_private, ..TransportSettings::default() }).unwrap()
    }

    #[tokio::test]
    async fn private_destinations_are_refused_unless_allowed() {
        let strict = transport(false);
        for url in [
            "http://127.0.0.1:9/x",
            "http://10.1.2.3/x",
            "http://[::1]/x",
            "http://[::ffff:192.168.0.1]/x",
            "http://169.254.169.254/latest",
            "http://0.0.0.0/",
            "http://localhost:8080/hook",
            "ftp://example.com/x",
            "not a url",
        ] {
            assert!(strict.check_destination(url).await.is_err(), "{url}");
        }
        assert!(strict.check_destination("https://93.184.216.34/hook").await.is_ok());
        let lenient = transport(true);
        assert!(lenient.check_destination("http://127.0.0.1:9/x").await.is_ok());
        assert!(lenient.check_destination("http://localhost:8080/hook").await.is_ok());
    }

    #[tokio::test]
    async fn a_refusal_names_its_class_and_never_the_address() {
        let strict = transport(false);
        let resolved = strict.check_destination("http://localhost:8080/hook").await.unwrap_err();
        assert!(resolved.contains("resolves to a private or reserved address"), "{resolved}");
        assert!(!resolved.contains("127.0.0.1") && !resolved.contains("::1"), "{resolved}");
        let literal = strict.check_destination("http://10.1.2.3/x").await.unwrap_err();
        assert!(literal.contains("a private or reserved address") && !literal.contains("10.1.2.3"), "{literal}");
        let unknown = strict.check_destination("http://genjobs-test.invalid/x").await.unwrap_err();
        assert!(unknown.contains("cannot be resolved"), "{unknown}");
    }

    #[tokio::test]
    async fn an_attempt_at_a_private_address_is_not_sent() {
        let outcome = transport(false)
            .send(OutgoingWebhook {
                url: "http://127.0.0.1:9/x".into(),
                id: "msg_1".into(),
                body: b"{}".to_vec(),
                secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            })
            .await;
        assert_eq!(outcome, AttemptOutcome::failed(None, AttemptFailure::RefusedAddress));
    }
}
