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
    /// How long one call may take (connecting: at most 5 s of it).
    pub(crate) timeout: Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            attempts: 3,
            backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
            allow_loopback: false,
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
    Transport(#[from] reqwest::Error),
    #[error("its host {0} is on this machine, and loopback webhooks are not allowed")]
    Loopback(String),
}

impl CallError {
    /// Worth another try: no answer, or a `5xx` or `429`.
    fn is_retryable(&self) -> bool {
        match self {
            CallError::Status(status) => *status >= 500 || *status == 429,
            CallError::Transport(_) => true,
            CallError::Loopback(_) => false,
        }
    }
}

/// The webhook caller of a server.
#[derive(Debug)]
pub(crate) struct Webhooks {
    client: reqwest::Client,
    config: WebhookConfig,
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return ip.is_loopback() || ip.is_unspecified();
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

impl Webhooks {
    pub(crate) fn new(config: WebhookConfig) -> Result<Self, ServerError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Fails only when another thread installed one first, which is as good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = reqwest::Client::builder()
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
        if !self.config.allow_loopback && is_loopback_host(host) {
            return Err(ApiError::unprocessable(
                "Webhook host blocked: loopback webhooks (localhost and its addresses) are disabled by default; \
                 allow them with ServerBuilder::allow_loopback_webhooks",
            ));
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
        if !self.config.allow_loopback {
            // A name may resolve to this machine even when it does not say so.
            if let Ok(parsed) = reqwest::Url::parse(url) {
                let host = parsed.host_str().unwrap_or_default().to_owned();
                let port = parsed.port_or_known_default().unwrap_or(80);
                let on_this_machine = match tokio::net::lookup_host((host.as_str(), port)).await {
                    Ok(mut addrs) => addrs.any(|a| a.ip().is_loopback() || a.ip().is_unspecified()),
                    Err(_) => false,
                };
                if on_this_machine {
                    return Err(CallError::Loopback(host));
                }
            }
        }
        let response = self.client.post(url).json(body).send().await?;
        let status = response.status();
        if status.is_success() { Ok(()) } else { Err(CallError::Status(status.as_u16())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised() {
        for host in ["localhost", "LOCALHOST.", "api.localhost", "127.0.0.1", "127.1.2.3", "[::1]", "0.0.0.0"]
        {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "localhost.example.com"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn urls_are_checked_as_langgraph_does() {
        let hooks = Webhooks::new(WebhookConfig::default()).unwrap();
        assert!(hooks.check_url("https://example.com/hook").is_ok());
        for bad in [
            "/internal",
            "ftp://example.com/x",
            "not a url",
            "http://localhost:9000/hook",
            "http://127.0.0.1/h",
        ] {
            let e = hooks.check_url(bad).unwrap_err();
            assert_eq!(e.status.as_u16(), 422, "{bad}");
        }
        assert!(hooks.check_url(&format!("https://example.com/{}", "a".repeat(5000))).is_err());
        let open = Webhooks::new(WebhookConfig { allow_loopback: true, ..WebhookConfig::default() }).unwrap();
        assert!(open.check_url("http://127.0.0.1:9000/hook").is_ok());
    }

    #[test]
    fn only_failures_without_an_answer_or_with_5xx_or_429_are_retried() {
        assert!(CallError::Status(500).is_retryable());
        assert!(CallError::Status(429).is_retryable());
        assert!(!CallError::Status(404).is_retryable());
        assert!(!CallError::Loopback("localhost".into()).is_retryable());
    }
}
