#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]
//! PostgreSQL outages as a caller sees them: a refused connection fails in well under a second with its
//! cause in the error chain and a retryable kind, at connect time and for a save of a running saver (the
//! server behind a proxy that is cut), also through a graph; the saver recovers when the server is back.

#![cfg(feature = "postgres")]

mod common;

use std::error::Error as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use weft_graph::checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointError, CheckpointErrorKind, CheckpointMetadata, CheckpointSource,
    Checkpointer,
};
use weft_graph::{CompileConfig, END, START, State, StateGraph};
use weft_integrations::postgres::{PostgresOptions, PostgresSaver, RetryPolicy};
use weft_runnable_core::RunnableConfig;

/// A TCP proxy to the test server that can be cut (connections dropped, its port closed: new
/// connections are refused) and restored on the same port.
struct Proxy {
    addr: SocketAddr,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Self { addr: listener.local_addr().unwrap(), tasks: Arc::default() };
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let upstream = server_addr();
        let tasks = self.tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(upstream.as_str()).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks.lock().unwrap().push(link);
            }
        });
        self.tasks.lock().unwrap().push(accept);
    }

    fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    async fn restore(&self) {
        // The aborted listener closes its socket when its task is dropped: wait for the port.
        for _ in 0..100 {
            if let Ok(listener) = TcpListener::bind(self.addr).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the proxy's port {} did not come back", self.addr);
    }

    fn url(&self) -> String {
        format!("postgres://postgres@{}/test", self.addr)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}

fn server_addr() -> String {
    let options: sqlx::postgres::PgConnectOptions = common::pg_url().parse().unwrap();
    format!("{}:{}", options.get_host(), options.get_port())
}

/// The error and its sources, joined.
fn chain(err: &CheckpointError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        text.push_str(" <- ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn assert_refused(err: &CheckpointError, took: Duration, within: Duration) {
    assert_eq!(err.kind(), CheckpointErrorKind::Unavailable, "{err:?}");
    assert!(err.is_retryable());
    assert!(err.source().is_some(), "the driver's error is kept: {err:?}");
    let text = chain(err).to_lowercase();
    assert!(text.contains("refused"), "the cause is named: {text}");
    assert!(!text.contains("pool timed out"), "the cause, not the pool's timeout: {text}");
    assert!(took < within, "failed after {took:?}, want under {within:?}: {text}");
}

/// A closed local port.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

fn checkpoint(id: &str) -> Checkpoint {
    Checkpoint {
        v: 1,
        id: id.to_owned(),
        ts: "2025-01-01T00:00:00+00:00".to_owned(),
        channel_values: [("n".into(), json!(1))].into_iter().collect(),
        channel_versions: [("n".into(), "1".into())].into_iter().collect(),
        versions_seen: Default::default(),
        updated_channels: Vec::new(),
    }
}

fn metadata() -> CheckpointMetadata {
    CheckpointMetadata {
        source: CheckpointSource::Loop,
        step: 0,
        parents: Default::default(),
        extra: Default::default(),
    }
}

async fn save(saver: &PostgresSaver, thread: &str) -> Result<CheckpointConfig, CheckpointError> {
    let cp = checkpoint(&uuid::Uuid::now_v7().to_string());
    let versions = cp.channel_versions.clone();
    saver.put(&CheckpointConfig::thread(thread), cp, metadata(), versions).await
}

#[tokio::test]
async fn a_refused_connection_fails_fast_with_its_cause() {
    let addr = closed_port().await;
    let url = format!("postgres://postgres@{addr}/test");
    for (retry, within) in
        [(RetryPolicy::none(), Duration::from_millis(600)), (RetryPolicy::default(), Duration::from_secs(2))]
    {
        let started = Instant::now();
        let options = PostgresOptions::default().retry(retry);
        let err = PostgresSaver::connect_with(&url, options).await.unwrap_err();
        assert_refused(&err, started.elapsed(), within);
        assert!(err.to_string().contains(&addr.to_string()), "names where it connects: {err}");
    }
}

#[derive(State, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    n: i64,
}

#[tokio::test]
async fn a_save_during_an_outage_fails_fast_with_its_cause_and_the_saver_recovers() {
    let Some(schema) = common::schema().await else { return };
    let proxy = Proxy::start().await;
    let options = schema.options().retry(RetryPolicy::none());
    let saver = PostgresSaver::connect_with(&proxy.url(), options).await.unwrap();
    save(&saver, "t").await.unwrap();

    proxy.cut();
    // The pooled connection is gone: the first save fails on it, the next one cannot connect.
    let started = Instant::now();
    let err = save(&saver, "t").await.unwrap_err();
    assert_eq!(err.kind(), CheckpointErrorKind::Unavailable, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    let started = Instant::now();
    let err = save(&saver, "t").await.unwrap_err();
    assert_refused(&err, started.elapsed(), Duration::from_millis(600));

    // Through a graph: the run fails with the saver's error, its kind reachable.
    let mut graph = StateGraph::<Count>::new();
    graph.add_node("inc", |s: Count| CountUpdate::new().n(s.n + 1));
    graph.add_edge(START, "inc");
    graph.add_edge("inc", END);
    let saver = Arc::new(saver);
    let app = graph.compile_with(CompileConfig::new().checkpointer(saver.clone())).unwrap();
    let config = RunnableConfig::default().with_configurable("thread_id", "g");
    let started = Instant::now();
    let err = app.invoke(CountUpdate::new().n(0), &config).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(err.checkpoint_error_kind(), Some(CheckpointErrorKind::Unavailable), "{err}");
    assert!(err.is_retryable(), "{err}");
    assert!(err.checkpoint_error().is_some_and(|e| chain(e).to_lowercase().contains("refused")), "{err}");
    let err = app.get_state(&config).await.unwrap_err();
    assert!(err.is_retryable(), "get_state during the outage: {err}");

    proxy.restore().await;
    save(&saver, "t").await.unwrap();
    let out = app.invoke(CountUpdate::new().n(0), &config).await.unwrap();
    assert_eq!(out.value.n, 1, "the saver works again once the server is back");
}

#[tokio::test]
async fn a_busy_pool_is_not_an_outage() {
    let Some(schema) = common::schema().await else { return };
    let options = PostgresOptions { max_connections: 2, ..schema.options() }.retry(RetryPolicy::none());
    let saver = Arc::new(PostgresSaver::connect_with(&common::pg_url(), options).await.unwrap());
    // Both pooled connections held for longer than a call waits before it probes the server.
    let held = (saver.pool().acquire().await.unwrap(), saver.pool().acquire().await.unwrap());
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(held);
    });
    let started = Instant::now();
    save(&saver, "busy").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300), "the save waited for a connection");
    release.await.unwrap();
    // Many saves through two connections: they queue, none fails.
    let saves = (0..60).map(|i| {
        let saver = saver.clone();
        async move { save(&saver, &format!("busy-{i}")).await }
    });
    for result in futures::future::join_all(saves).await {
        result.unwrap();
    }
}
