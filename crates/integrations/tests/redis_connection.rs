//! RedisSaver's connection: passwords kept out of `Debug`, errors and logs; transient failures retried;
//! a dropped connection replaced. A small TCP proxy in front of the real server cuts connections on cue.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, missing_docs)]

mod redis_common;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use redis_common::{Cleanup, fresh_prefix, raw, reachable_or_skip};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use weft_graph::checkpoint::{CheckpointConfig, Checkpointer};
use weft_integrations::redis::{RedisOptions, RedisSaver};

type TestResult = Result<(), String>;

/// A TCP proxy to the test server that can refuse and cut connections.
struct Proxy {
    addr: SocketAddr,
    up: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (up2, links2) = (up.clone(), links.clone());
        let upstream = Arc::new(redis_common::addr());
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    continue; // dropped: the client sees the connection closed
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream.as_str()).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                links2.lock().unwrap().push(link);
            }
        });
        Self { addr, up, links, accept }
    }

    /// Closes every open connection and refuses new ones.
    fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// A Redis user with a password, deleted when dropped.
struct AclUser {
    name: String,
    password: String,
}

impl AclUser {
    async fn create() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let user = Self { name: format!("weft-test-{id}"), password: format!("pw-{id}-secret") };
        let mut conn = raw().await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&user.name)
            .arg("on")
            .arg(format!(">{}", user.password))
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .query_async(&mut conn)
            .await
            .unwrap();
        user
    }

    fn url(&self, addr: &str) -> String {
        format!("redis://{}:{}@{addr}/", self.name, self.password)
    }
}

impl Drop for AclUser {
    fn drop(&mut self) {
        if let Ok(mut conn) = redis::Client::open(redis_common::url()).and_then(|c| c.get_connection()) {
            let _: Result<i64, _> = redis::cmd("ACL").arg("DELUSER").arg(&self.name).query(&mut conn);
        }
    }
}

/// Log lines written while a test runs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every log line of this test binary, captured by a global subscriber (a thread-local one can miss
/// events when tests run in parallel: tracing caches callsite interest globally).
fn captured_logs() -> Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber).unwrap();
            captured
        })
        .clone()
}

/// An error and its sources, joined (every text a log could show).
fn chain(err: &weft_graph::checkpoint::CheckpointError) -> String {
    let mut text = format!("{err} {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        text.push_str(&format!(" <- {e} {e:?}"));
        source = e.source();
    }
    text
}

#[tokio::test]
async fn the_password_never_shows_in_debug_errors_or_logs() -> TestResult {
    if reachable_or_skip("password")?.is_none() {
        return Ok(());
    }
    let logs = captured_logs();
    let user = AclUser::create().await;
    let proxy = Proxy::start().await;
    let prefix = fresh_prefix("password");
    let _cleanup = Cleanup(prefix.clone());
    let options = RedisOptions::new(user.url(&proxy.addr.to_string()))
        .prefix(prefix.clone())
        .retries(2, Duration::from_millis(10));
    let saver = RedisSaver::connect_with(options).await.unwrap();
    let thread = CheckpointConfig::thread("t");
    saver.put_writes(&thread.at("c1"), vec![("x".into(), json!(1))], "task", "").await.unwrap();
    for text in [format!("{saver:?}"), format!("{:?}", saver.options()), saver.options().redacted_url()] {
        assert!(!text.contains(&user.password), "{text}");
        assert!(text.contains(&user.name), "the user name stays visible: {text}");
    }
    proxy.cut();
    let err = saver.get_tuple(&thread).await.unwrap_err();
    assert!(err.is_retryable(), "a cut connection is unavailable: {err:?}");
    assert!(!chain(&err).contains(&user.password), "{err}");
    let wrong =
        RedisOptions::new(format!("redis://{}:wrong-{}@{}/", user.name, user.password, redis_common::addr()));
    let err = RedisSaver::connect_with(wrong).await.unwrap_err();
    assert!(!chain(&err).contains(&user.password), "{err}");
    assert!(!err.is_retryable(), "wrong credentials are not retryable: {err:?}");
    let closed = RedisOptions::new(user.url("127.0.0.1:1")).retries(1, Duration::from_millis(10));
    let err = RedisSaver::connect_with(closed).await.unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");
    assert!(!chain(&err).contains(&user.password), "{err}");
    assert!(err.is_retryable(), "a refused connection is unavailable: {err:?}");
    let logged = logs.text();
    assert!(logged.contains("retrying"), "transient failures are logged: {logged}");
    assert!(!logged.contains(&user.password), "{logged}");
    Ok(())
}

#[tokio::test]
async fn a_dropped_connection_is_replaced_and_the_command_retried() -> TestResult {
    if reachable_or_skip("reconnect")?.is_none() {
        return Ok(());
    }
    let proxy = Proxy::start().await;
    let prefix = fresh_prefix("reconnect");
    let _cleanup = Cleanup(prefix.clone());
    let options = RedisOptions::new(format!("redis://{}", proxy.addr))
        .prefix(prefix.clone())
        .retries(8, Duration::from_millis(20));
    let saver = RedisSaver::connect_with(options).await.unwrap();
    let thread = CheckpointConfig::thread("t");
    saver.put_writes(&thread.at("c1"), vec![("x".into(), json!(1))], "task", "").await.unwrap();
    proxy.cut();
    let proxy = Arc::new(proxy);
    let back = proxy.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        back.restore();
    });
    // The first tries fail (connection closed), then the server is back.
    saver.put_writes(&thread.at("c1"), vec![("y".into(), json!(2))], "task-2", "").await.unwrap();
    let mut conn = raw().await;
    let stored: i64 =
        redis::cmd("HLEN").arg(format!("{prefix}:t:t:n::w:c1")).query_async(&mut conn).await.unwrap();
    assert_eq!(stored, 2);
    Ok(())
}

#[tokio::test]
async fn bad_options_are_rejected_before_connecting() -> TestResult {
    let err = RedisSaver::connect_with(RedisOptions::new("redis://127.0.0.1:1").prefix("")).await;
    assert!(err.unwrap_err().to_string().contains("prefix must not be empty"));
    let err = RedisSaver::connect_with(RedisOptions::new("not a url at all")).await.unwrap_err();
    assert!(err.to_string().contains("invalid redis url"), "{err}");
    Ok(())
}
