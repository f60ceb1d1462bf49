//! `RedisOptions`: where Redis is, the key prefix, the retry policy, and the saver's TTL and list storage.

use std::fmt;
use std::time::Duration;

/// How a [`RedisSaver`](super::RedisSaver) or a [`RedisStore`](super::RedisStore) connects and keeps its
/// keys. The URL, prefix, retries and timeouts apply to both; the TTL and [`deltas`](Self::deltas) are the
/// saver's (a store's TTLs are set per item, see [`RedisStore::with_ttl`](super::RedisStore::with_ttl)).
///
/// The URL is `redis://[user[:password]@]host[:port][/db]` (or `rediss://`, `redis+unix://`); its
/// password never shows in `Debug` output, errors or logs.
#[derive(Clone)]
pub struct RedisOptions {
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) ttl: Option<Duration>,
    pub(crate) refresh_on_read: bool,
    pub(crate) max_retries: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) connection_timeout: Duration,
    pub(crate) snapshot_every: usize,
    pub(crate) delta_cache_entries: usize,
    pub(crate) delta_cache_bytes: usize,
}

impl RedisOptions {
    /// Options for the server at `url`, with the defaults: prefix `"weft"`, no TTL, 3 retries of transient
    /// errors starting 50 ms apart, 5 s response timeout, 2 s connection timeout, growing lists stored as
    /// appended elements with a whole copy every 64 versions.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "weft".to_owned(),
            ttl: None,
            refresh_on_read: true,
            max_retries: 3,
            retry_delay: Duration::from_millis(50),
            response_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(2),
            snapshot_every: 64,
            delta_cache_entries: 1024,
            delta_cache_bytes: 64 << 20,
        }
    }

    /// Every key starts with `prefix` followed by `:` (separate applications or test runs by prefix).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Every key of a thread expires `ttl` after the thread was last written (or read, see
    /// [`refresh_on_read`](Self::refresh_on_read)); the whole thread expires together.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Whether reading a thread restarts its TTL (default `true`).
    pub fn refresh_on_read(mut self, refresh: bool) -> Self {
        self.refresh_on_read = refresh;
        self
    }

    /// How many times a command failing with a transient error (connection dropped or refused, timeout,
    /// server loading) is tried again, with exponential backoff from `delay`. Every command the saver
    /// sends is idempotent, so a retry never applies a change twice.
    pub fn retries(mut self, max_retries: u32, delay: Duration) -> Self {
        self.max_retries = max_retries;
        self.retry_delay = delay;
        self
    }

    /// How long to wait for a reply, and for a connection.
    pub fn timeouts(mut self, response: Duration, connection: Duration) -> Self {
        self.response_timeout = response;
        self.connection_timeout = connection;
        self
    }

    /// How growing lists (message lists) are stored: a list that extends the one stored at the channel's
    /// previous version (or that the engine hands over as appended items) is stored as the appended
    /// elements, with a whole copy every `snapshot_every` versions (so a read follows at most that many in
    /// a process that saw the whole run); the last list of up to `cache_entries` channels is kept in
    /// memory to compare with. `snapshot_every` of 0 or 1 stores every version whole (the engine then
    /// hands over whole lists). Reading any checkpoint rebuilds the exact value.
    pub fn deltas(mut self, snapshot_every: usize, cache_entries: usize) -> Self {
        self.snapshot_every = snapshot_every;
        self.delta_cache_entries = cache_entries;
        self
    }

    /// How large the lists kept to compare with may be together, measured as about their JSON size
    /// (default 64 MiB; their memory is a small multiple of it). Past it, or past `cache_entries`, the
    /// least recently stored are forgotten (their channel's next version is then stored whole); a list
    /// larger than this is not kept, so each version of its channel is stored whole.
    pub fn delta_cache_bytes(mut self, bytes: usize) -> Self {
        self.delta_cache_bytes = bytes;
        self
    }

    /// The URL with its password replaced by `***`.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("url", &self.redacted_url())
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .field("refresh_on_read", &self.refresh_on_read)
            .field("max_retries", &self.max_retries)
            .field("retry_delay", &self.retry_delay)
            .field("response_timeout", &self.response_timeout)
            .field("connection_timeout", &self.connection_timeout)
            .field("snapshot_every", &self.snapshot_every)
            .field("delta_cache_entries", &self.delta_cache_entries)
            .field("delta_cache_bytes", &self.delta_cache_bytes)
            .finish()
    }
}

/// `url` with the password of its user info and any `pass`/`password` query parameter replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:***{host}", &userinfo[..colon]),
                None => authority.to_owned(),
            }
        }
        None => authority.to_owned(),
    };
    let tail = match tail.find('?') {
        Some(q) => {
            let (path, query) = tail.split_at(q + 1);
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _))
                        if key.eq_ignore_ascii_case("pass") || key.eq_ignore_ascii_case("password") =>
                    {
                        format!("{key}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(redact_url("redis://user:s3cret@host:6379/2"), "redis://user:***@host:6379/2");
        assert_eq!(redact_url("redis://:s3cret@host"), "redis://:***@host");
        assert_eq!(redact_url("redis://p:a@b@host/0"), "redis://p:***@host/0");
        assert_eq!(redact_url("redis://host:6379/0"), "redis://host:6379/0");
        assert_eq!(redact_url("redis://user@host"), "redis://user@host");
        assert_eq!(
            redact_url("redis+unix:///run/redis.sock?db=1&pass=s3cret&user=u"),
            "redis+unix:///run/redis.sock?db=1&pass=***&user=u"
        );
    }

    #[test]
    fn debug_output_hides_the_password() {
        let options = RedisOptions::new("redis://admin:hunter2@10.0.0.1:6379").prefix("app");
        let text = format!("{options:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("admin:***@10.0.0.1"), "{text}");
    }
}
