//! Which hosts outputs are read from. A provider's result names the URLs of its outputs, and the
//! service fetches them (to keep a copy, to serve `b64_json` or a video's content): without a
//! limit, a result naming `http://169.254.169.254/…` or a database on the private network would
//! make the service fetch it. So a URL is read only when its host is on the list — the providers'
//! media hosts (`GENJOBS_OUTPUT_HOSTS`, each also covering its subdomains) and the hosts of the
//! configured provider URLs — and, unless its host is one of those provider hosts, only from
//! public addresses: the check runs on the addresses the name resolves to, in the resolver the
//! connection itself uses, so a name that resolves differently later (DNS rebinding) is caught.
//! Redirects are followed only to hosts on the list.

use std::net::{IpAddr, SocketAddr};

use genjobs_domain::address::is_public;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The providers' media hosts read by default: fal's CDN and Replicate's.
pub const DEFAULT_OUTPUT_HOSTS: &[&str] = &["fal.media", "replicate.delivery"];

/// The hosts outputs may be read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputHosts {
    /// Media hosts, each with its subdomains; only their public addresses.
    media: Vec<String>,
    /// The configured providers' own hosts, exactly; any address, loopback included, since that
    /// is where the operator configured a provider.
    providers: Vec<String>,
}

impl OutputHosts {
    /// `media` hosts (with their subdomains) and the hosts of `provider_urls`.
    #[must_use]
    pub fn new<'a>(media: impl IntoIterator<Item = &'a str>, provider_urls: impl IntoIterator<Item = &'a str>) -> Self {
        let clean = |host: &str| host.trim().trim_start_matches("*.").trim_end_matches('.').to_ascii_lowercase();
        Self {
            media: media.into_iter().map(clean).filter(|h| !h.is_empty()).collect(),
            providers: provider_urls
                .into_iter()
                .filter_map(|url| url::Url::parse(url).ok())
                .filter_map(|url| url.host_str().map(clean))
                .collect(),
        }
    }

    /// Whether `host` is a configured provider's own host.
    pub(crate) fn is_provider(&self, host: &str) -> bool {
        let host = bare(host);
        self.providers.iter().any(|p| bare(p) == host)
    }

    /// Whether `host` is on the list.
    #[must_use]
    pub fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.is_provider(&host)
            || self
                .media
                .iter()
                .any(|m| host == *m || host.strip_suffix(m.as_str()).is_some_and(|rest| rest.ends_with('.')))
    }

    /// Whether `url` may be read: an `http(s)` URL whose host is on the list, and, when the host
    /// is an address, a public one unless it is a provider's.
    ///
    /// # Errors
    /// Why it may not, for the job's record.
    pub fn check(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|_| "the output's URL is not a URL".to_owned())?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("only http and https outputs are read".into());
        }
        let host = parsed.host_str().ok_or_else(|| "the output's URL has no host".to_owned())?;
        if !self.allows_host(host) {
            return Err(format!("outputs are not read from {host} (GENJOBS_OUTPUT_HOSTS)"));
        }
        if let Ok(ip) = bare(host).parse::<IpAddr>()
            && !self.is_provider(host)
            && !is_public(ip)
        {
            return Err(format!("outputs are not read from the private address {ip}"));
        }
        Ok(())
    }
}

/// A host without the brackets of an IPv6 literal.
fn bare(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The error of a name the [`PublicResolver`] found no address for that may be called: a
/// client finds it among the causes of its connection error, to tell a refused destination from
/// one that did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoPublicAddress(pub String);

impl std::fmt::Display for NoPublicAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to no public address", self.0)
    }
}

impl std::error::Error for NoPublicAddress {}

/// A resolver for clients that call hosts someone else named: a name's addresses, less the
/// non-public ones unless `trusted` says the name may use any. It runs at connection time, so
/// a name that resolves differently after a check (DNS rebinding) is caught. The output reader
/// trusts the configured providers' hosts; the client webhooks trust every name only when the
/// operator allows private destinations.
#[derive(Clone)]
pub struct PublicResolver {
    trusted: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl std::fmt::Debug for PublicResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicResolver").finish_non_exhaustive()
    }
}

impl PublicResolver {
    /// Keeps only public addresses of the names `trusted` refuses.
    #[must_use]
    pub fn new(trusted: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self { trusted: Arc::new(trusted) }
    }
}

impl Resolve for PublicResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let name = name.as_str().to_owned();
        let trusted = (self.trusted)(&name);
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let usable: Vec<SocketAddr> = found.into_iter().filter(|a| trusted || is_public(a.ip())).collect();
            if usable.is_empty() {
                return Err(Box::new(NoPublicAddress(name)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(usable.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> OutputHosts {
        OutputHosts::new(["fal.media", "*.replicate.delivery"], ["http://127.0.0.1:4000", "https://queue.fal.run"])
    }

    #[test]
    fn media_hosts_cover_their_subdomains_and_provider_hosts_only_themselves() {
        let hosts = hosts();
        for allowed in
            ["fal.media", "v3.fal.media", "pbxt.replicate.delivery", "127.0.0.1", "queue.fal.run", "FAL.MEDIA."]
        {
            assert!(hosts.allows_host(allowed), "{allowed}");
        }
        for refused in ["evilfal.media", "fal.media.evil.com", "127.0.0.2", "localhost", "other.fal.run", "10.0.0.1"] {
            assert!(!hosts.allows_host(refused), "{refused}");
        }
    }

    #[test]
    fn urls_are_checked_for_scheme_host_and_private_addresses() {
        let hosts = OutputHosts::new(["fal.media", "10.1.2.3", "[::1]"], ["http://127.0.0.1:4000"]);
        assert!(hosts.check("https://v3.fal.media/files/a.png").is_ok());
        assert!(hosts.check("http://127.0.0.1:4000/_sim/files/x").is_ok(), "the configured provider, on loopback");
        assert!(hosts.check("http://10.1.2.3/x").is_err(), "listed, but a private address");
        assert!(hosts.check("http://[::1]/x").is_err(), "listed, but loopback");
        assert!(hosts.check("ftp://fal.media/x").is_err());
        assert!(hosts.check("https://169.254.169.254/latest/meta-data").is_err());
    }
}
