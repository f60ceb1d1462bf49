//! Webhooks: when a run that names one ends (success, error, interrupted, rolled back), its JSON is POSTed
//! there (LangGraph's payload: the run, its `status`, `run_started_at`, `run_ended_at`, `webhook_sent_at`,
//! the thread's `values` and any `error`), in a task of its own so that the run never waits on it; a
//! failed call (no connection, a timeout, a `5xx` or `429`) is tried again after a backoff, a few times.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use weft_runnable_core::retry::Backoff;

use crate::error::{ApiError, ServerError};

/// The longest webhook URL accepted (LangGraph's `max_url_length` default).
const MAX_URL_LENGTH: usize = 4096;

/// How webhooks are called.
#[derive(Debug, Clone)]
pub(crate) struct WebhookConfig {
    /// How many times a call is made before giving up (LangGraph: 3).
    pub(crate) attempts: u32,
    /// The waits between attempts.
    pub(crate) backoff: Backoff,
    /// Whether URLs on this machine (`localhost`, `127.0.0.1`, `::1`) may be called; LangGraph refuses
    /// them unless told otherwise.
    pub(crate) allow_loopback: bool,
    /// Whether private, link-local and shared (CGNAT) addresses may be called.
    pub(crate) allow_private: bool,
    /// How long one call may take (connecting: at most 5 s of it).
    pub(crate) timeout: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
            allow_loopback: false,
            allow_private: false,
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why one call of a webhook failed.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("the receiver answered {0}")]
    Status(u16),
    #[error("{0}")]
    Transport(reqwest::Error),
    #[error("{0}")]
    Refused(Refused),
}

/// A destination a webhook may not reach: its host, and what the address is.
#[derive(Debug, Clone, thiserror::Error)]
#[error("its host {host} is {reach} ({addr}), and such webhooks are not allowed")]
struct Refused {
    host: String,
    addr: IpAddr,
    reach: Reach,
}

/// Where an address leads, for the webhook destinations' policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The internet.
    Public,
    /// This machine: loopback and unspecified addresses (`0.0.0.0/8`, `::`).
    Loopback,
    /// A private network: RFC 1918 (`10/8`, `172.16/12`, `192.168/16`), unique local (`fc00::/7`),
    /// link-local (`169.254/16`, `fe80::/10`) and shared (CGNAT, `100.64/10`) addresses.
    Private,
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reach::Public => "public",
            Reach::Loopback => "on this machine",
            Reach::Private => "on a private or link-local network",
        })
    }
}

fn reach_v4(ip: std::net::Ipv4Addr) -> Reach {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() || a == 0 {
        Reach::Loopback
    } else if ip.is_private() || ip.is_link_local() || (a == 100 && (b & 0xc0) == 64) {
        Reach::Private
    } else {
        Reach::Public
    }
}

/// Where `ip` leads; an IPv6 address holding an IPv4 one (mapped `::ffff:a.b.c.d`, compatible
/// `::a.b.c.d`) leads where that one does.
fn reach(ip: IpAddr) -> Reach {
    match ip {
        IpAddr::V4(v4) => reach_v4(v4),
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() || v6.is_unspecified() {
                Reach::Loopback
            } else if let Some(v4) = v6.to_ipv4() {
                reach_v4(v4)
            } else if (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80 {
                Reach::Private
            } else {
                Reach::Public
            }
        }
    }
}

/// Which destinations webhooks may reach.
#[derive(Debug, Clone, Copy)]
struct Policy {
    allow_loopback: bool,
    allow_private: bool,
}

impl Policy {
    fn of(config: &WebhookConfig) -> Self {
        Self { allow_loopback: config.allow_loopback, allow_private: config.allow_private }
    }

    /// Why `host`'s address `addr` may not be called; none when it may.
    fn check(self, host: &str, addr: IpAddr) -> Result<(), Refused> {
        let reach = reach(addr);
        let allowed = match reach {
            Reach::Public => true,
            Reach::Loopback => self.allow_loopback,
            Reach::Private => self.allow_private,
        };
        if allowed { Ok(()) } else { Err(Refused { host: host.to_owned(), addr, reach }) }
    }
}

/// The webhook client's name resolution: each name is resolved once, and refused when any of its
/// addresses may not be called; the client connects to the addresses checked here, never resolving the
/// name again (a name that changes its answer between a check and the call reaches nothing unchecked).
struct CheckedResolver(Policy);

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                policy.check(&host, addr.ip())?;
            }
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The refusal behind a failed call, if that is why it failed.
fn refusal_in(error: &reqwest::Error) -> Option<&Refused> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused);
        }
        source = e.source();
    }
    None
}

impl CallError {
    /// Worth another try: no answer, or a `5xx` or `429`.
    fn is_retryable(&self) -> bool {
        match self {
            CallError::Status(status) => *status >= 500 || *status == 429,
            CallError::Transport(_) => true,
            CallError::Refused(_) => false,
        }
    }
}

/// The webhook caller of a server.
#[derive(Debug)]
pub(crate) struct Webhooks {
    client: reqwest::Client,
    config: WebhookConfig,
}

/// The address a URL's host names literally (`127.0.0.1`, `[::1]`; the URL parser has already read the
/// other IPv4 forms, `2130706433`, `0x7f.1`, `127.1`, into this one), or that `localhost` and its
/// subdomains always name.
fn literal_addr(host: &str) -> Option<IpAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ip);
    }
    let name = bare.trim_end_matches('.').to_ascii_lowercase();
    (name == "localhost" || name.ends_with(".localhost")).then_some(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST))
}

impl Webhooks {
    pub(crate) fn new(config: WebhookConfig) -> Result<Self, ServerError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Fails only when another thread installed one first, which is as good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(CheckedResolver(Policy::of(&config))))
            // As LangGraph's (httpx's) client: a redirect is not followed, so it cannot lead elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.timeout.min(Duration::from_secs(5)))
            .timeout(config.timeout)
            .build()
            .map_err(ServerError::Webhooks)?;
        Ok(Self { client, config })
    }

    /// Checks a webhook URL when a run or cron is made: absolute `http` or `https` with a host, not too
    /// long, and not on this machine unless allowed. LangGraph's `422` texts.
    pub(crate) fn check_url(&self, url: &str) -> Result<(), ApiError> {
        if url.len() > MAX_URL_LENGTH {
            return Err(ApiError::unprocessable("Webhook URL too long"));
        }
        if url.starts_with('/') {
            return Err(ApiError::unprocessable(
                "Relative webhook URLs are not supported: give an absolute http or https URL",
            ));
        }
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| ApiError::unprocessable(format!("Invalid webhook URL '{url}': {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ApiError::unprocessable(format!(
                "Invalid webhook URL '{url}': the scheme must be http or https"
            )));
        }
        let host = parsed.host_str().unwrap_or_default();
        if host.is_empty() {
            return Err(ApiError::unprocessable(format!("Invalid webhook hostname '{host}'")));
        }
        if let Some(addr) = literal_addr(host) {
            if let Err(refused) = Policy::of(&self.config).check(host, addr) {
                let allow = match refused.reach {
                    Reach::Private => "ServerBuilder::allow_private_webhooks",
                    _ => "ServerBuilder::allow_loopback_webhooks",
                };
                return Err(ApiError::unprocessable(format!(
                    "Webhook host blocked: {host} is {} and such webhooks are disabled by default; allow them with \
                     {allow}",
                    refused.reach
                )));
            }
        }
        Ok(())
    }

    /// Calls `url` with `payload` in a task of its own, retried as configured; failures are logged.
    pub(crate) fn send(self: &Arc<Self>, url: String, payload: Value) {
        let webhooks = Arc::clone(self);
        tokio::spawn(async move {
            let run_id = payload.get("run_id").and_then(Value::as_str).unwrap_or_default().to_owned();
            match webhooks.deliver(&url, &payload).await {
                Ok(attempts) => tracing::info!(run_id, webhook = url, attempts, "webhook called"),
                Err(e) => tracing::warn!(run_id, webhook = url, error = %e, "webhook failed"),
            }
        });
    }

    /// Calls until a `2xx`, a failure not worth retrying, or the last attempt; the number of attempts made.
    async fn deliver(&self, url: &str, payload: &Value) -> Result<u32, CallError> {
        let mut attempt = 1;
        loop {
            let mut body = payload.clone();
            if let Value::Object(map) = &mut body {
                map.insert("webhook_sent_at".into(), Value::String(crate::app::now()));
            }
            match self.call(url, &body).await {
                Ok(()) => return Ok(attempt),
                Err(e) if e.is_retryable() && attempt < self.config.attempts => {
                    tracing::debug!(webhook = url, attempt, error = %e, "webhook failed, retrying");
                    tokio::time::sleep(self.config.backoff.delay(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn call(&self, url: &str, body: &Value) -> Result<(), CallError> {
        // A literal address is not resolved, so the resolver does not see it: checked here (a URL checked
        // when its run was made may be called after the policy changed).
        if let Ok(parsed) = reqwest::Url::parse(url) {
            let host = parsed.host_str().unwrap_or_default();
            if let Some(addr) = literal_addr(host) {
                Policy::of(&self.config).check(host, addr).map_err(CallError::Refused)?;
            }
        }
        let response = self.client.post(url).json(body).send().await.map_err(|e| match refusal_in(&e) {
            Some(refused) => CallError::Refused(refused.clone()),
            None => CallError::Transport(e),
        })?;
        let status = response.status();
        if status.is_success() { Ok(()) } else { Err(CallError::Status(status.as_u16())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_placed_in_every_form() {
        use Reach::{Loopback, Private, Public};
        let table = [
            ("127.0.0.1", Loopback),
            ("127.1.2.3", Loopback),
            ("0.0.0.0", Loopback),
            ("0.1.2.3", Loopback),
            ("::1", Loopback),
            ("::", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("::127.0.0.1", Loopback),
            ("::ffff:0.0.0.0", Loopback),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("169.254.169.254", Private),
            ("100.64.0.1", Private),
            ("100.127.255.255", Private),
            ("fc00::1", Private),
            ("fd12:3456::1", Private),
            ("fe80::1", Private),
            ("febf::1", Private),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:169.254.169.254", Private),
            ("93.184.216.34", Public),
            ("172.32.0.1", Public),
            ("100.128.0.1", Public),
            ("100.63.255.255", Public),
            ("2606:4700::1111", Public),
            ("fec0::1", Public),
        ];
        for (ip, expected) in table {
            assert_eq!(reach(ip.parse().unwrap()), expected, "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_as_langgraph_does() {
        let hooks = Webhooks::new(WebhookConfig::default()).unwrap();
        assert!(hooks.check_url("https://example.com/hook").is_ok());
        for bad in ["/internal", "ftp://example.com/x", "not a url"] {
            let e = hooks.check_url(bad).unwrap_err();
            assert_eq!(e.status.as_u16(), 422, "{bad}");
        }
        assert!(hooks.check_url(&format!("https://example.com/{}", "a".repeat(5000))).is_err());
    }

    /// Every way a URL can name an address on this machine or a private network, as the URL parser reads
    /// it (decimal, hexadecimal, octal and short IPv4 forms, IPv4 inside IPv6).
    const ON_THIS_MACHINE: [&str; 14] = [
        "http://localhost:9000/hook",
        "http://LOCALHOST./hook",
        "http://api.localhost/hook",
        "http://127.0.0.1/h",
        "http://127.1/h",
        "http://2130706433/h",
        "http://0x7f.1/h",
        "http://0177.0.0.1/h",
        "http://0x7f000001/h",
        "http://0.0.0.0/h",
        "http://[::1]/h",
        "http://[::]/h",
        "http://[::ffff:127.0.0.1]/h",
        "http://[::ffff:7f00:1]/h",
    ];
    const PRIVATE: [&str; 9] = [
        "http://10.0.0.1/h",
        "http://172.16.5.4/h",
        "http://192.168.0.1/h",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/h",
        "http://[fd00::1]/h",
        "http://[fe80::1]/h",
        "http://[::ffff:a00:1]/h",
        "http://167772161/h",
    ];

    fn hooks(allow_loopback: bool, allow_private: bool) -> Webhooks {
        Webhooks::new(WebhookConfig { allow_loopback, allow_private, ..WebhookConfig::default() }).unwrap()
    }

    #[test]
    fn literal_loopback_and_private_destinations_are_refused_unless_allowed() {
        for url in ON_THIS_MACHINE {
            let e = hooks(false, true).check_url(url).unwrap_err();
            assert_eq!(e.status.as_u16(), 422, "{url}");
            assert!(e.detail.contains("allow_loopback_webhooks"), "{url}: {}", e.detail);
            assert!(hooks(true, false).check_url(url).is_ok(), "{url} allowed");
        }
        for url in PRIVATE {
            let e = hooks(true, false).check_url(url).unwrap_err();
            assert_eq!(e.status.as_u16(), 422, "{url}");
            assert!(e.detail.contains("allow_private_webhooks"), "{url}: {}", e.detail);
            assert!(hooks(false, true).check_url(url).is_ok(), "{url} allowed");
        }
        for url in ["http://93.184.216.34/h", "http://[2606:4700::1111]/h", "http://100.128.0.1/h"] {
            assert!(hooks(false, false).check_url(url).is_ok(), "{url}");
        }
    }

    #[tokio::test]
    async fn a_refused_literal_is_not_called_and_not_retried() {
        let e = hooks(false, false).call("http://[::ffff:127.0.0.1]:9/h", &Value::Null).await.unwrap_err();
        assert!(matches!(&e, CallError::Refused(r) if r.reach == Reach::Loopback), "{e}");
        assert!(!e.is_retryable());
    }

    /// Names that resolve to this machine without saying so: `/etc/hosts` holds some besides
    /// `localhost` on most systems (the machine's own name, `ip6-localhost`, ...).
    #[cfg(unix)]
    #[tokio::test]
    async fn names_that_resolve_to_this_machine_are_refused_when_resolved() {
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let names: Vec<String> = hosts
            .lines()
            .map(|line| line.split('#').next().unwrap_or_default())
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let ip: IpAddr = fields.next()?.parse().ok()?;
                Some(
                    fields
                        .filter(move |_| reach(ip) == Reach::Loopback)
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                )
            })
            .flatten()
            .filter(|name| literal_addr(name).is_none())
            .collect();
        let resolver = CheckedResolver(Policy { allow_loopback: false, allow_private: false });
        let open = CheckedResolver(Policy { allow_loopback: true, allow_private: true });
        for name in &names {
            use reqwest::dns::Resolve as _;
            let resolved = tokio::net::lookup_host((name.as_str(), 0)).await;
            if !resolved.is_ok_and(|mut addrs| addrs.all(|a| reach(a.ip()) == Reach::Loopback)) {
                continue; // another source answers for it (DNS, nsswitch)
            }
            let Err(e) = resolver.resolve(name.parse().unwrap()).await else {
                panic!("{name} was let through")
            };
            let refused = e.downcast_ref::<Refused>().unwrap_or_else(|| panic!("{name}: {e}"));
            assert_eq!(refused.reach, Reach::Loopback, "{name}");
            assert!(open.resolve(name.parse().unwrap()).await.is_ok(), "{name} allowed");
            // Through the client: the call fails as refused, not as a connection error worth a retry.
            let url = format!("http://{name}:9/hook");
            let e = hooks(false, false).call(&url, &Value::Null).await.unwrap_err();
            assert!(matches!(&e, CallError::Refused(_)), "{name}: {e}");
            assert!(!e.is_retryable());
        }
        eprintln!("names resolving to this machine checked: {names:?}");
    }

    #[test]
    fn only_failures_without_an_answer_or_with_5xx_or_429_are_retried() {
        assert!(CallError::Status(500).is_retryable());
        assert!(CallError::Status(429).is_retryable());
        assert!(!CallError::Status(404).is_retryable());
        let refused = Refused { host: "x".into(), addr: IpAddr::from([10, 0, 0, 1]), reach: Reach::Private };
        assert!(!CallError::Refused(refused).is_retryable());
    }
}
