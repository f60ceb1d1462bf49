//! [`Server`] and [`ServerBuilder`]: register graphs, open the database, serve.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use weft_graph::store::{Store, TtlConfig};
use weft_graph::{Checkpointer, InMemorySaver, InMemoryStore};
use weft_integrations::sqlite::{SqliteSaver, SqliteStore};
use weft_runnable_core::retry::Backoff;

use crate::app::{App, Limits, now};
use crate::auth::{Auth, StaticCredentials};
use crate::error::ServerError;
use crate::graphs::{GraphRegistry, Registered, ServerGraph, default_assistant_id};
use crate::model::Assistant;
use crate::runs::channel::Channels;
use crate::storage::{Change, Key, Records, RecordsLock, WriterLock};
use crate::webhook::{WebhookConfig, Webhooks};

/// The largest request body by default: 300 MiB, LangGraph's `HTTP_MAX_REQUEST_BODY_BYTES` default.
const DEFAULT_BODY_BYTES: usize = 300 * 1024 * 1024;

/// How long a stream stays quiet before a heartbeat by default (LangGraph's 5 s).
const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// How long open requests (streams of runs still going) may take to end after a shutdown, by default.
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long a request's head may take to arrive, from its first byte, by default.
const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a connection with no request in flight may stay silent by default.
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a request's body may take to arrive, from its head, by default.
const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(300);

/// How many connections are served at once by default.
const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// How many runs execute at once by default.
const DEFAULT_CONCURRENT_RUNS: usize = 256;

/// How long a run may go without progress before the watchdog ends it, by default: longer than any
/// model call that streams nothing (a long reasoning call takes minutes).
pub const DEFAULT_RUN_WATCHDOG: Duration = Duration::from_secs(10 * 60);

#[derive(Debug, Clone)]
enum Database {
    /// A SQLite file.
    File(PathBuf),
    /// A SQLite database in memory: the durable code paths, without a file.
    SqliteMemory,
    /// No database: records, checkpoints and the store in this process's memory.
    Memory,
}

/// Builds a [`Server`]: its graphs, its database, its limits.
///
/// ```no_run
/// use serde_json::json;
/// use weft_graph::{ChannelKind, JsonState, START, StateGraph};
/// use weft_server::Server;
///
/// # async fn run() -> Result<(), weft_server::ServerError> {
/// let state = JsonState::builder().append("items").build();
/// let mut graph = StateGraph::with_initial(state);
/// graph.add_node("hello", |_: &JsonState| json!({"items": ["hello"]}));
/// graph.add_edge(START, "hello");
/// let graph = graph.compile().expect("a valid graph");
///
/// Server::builder().graph("agent", graph).sqlite("weft-server.db").serve("127.0.0.1:2024").await
/// # }
/// ```
#[derive(Debug)]
pub struct ServerBuilder {
    graphs: Vec<(String, ServerGraph)>,
    database: Database,
    body_bytes: usize,
    concurrent_runs: usize,
    keep_alive: Duration,
    shutdown_grace: Duration,
    run_timeout: Option<Duration>,
    run_watchdog: Option<Duration>,
    header_timeout: Duration,
    idle_timeout: Duration,
    body_timeout: Duration,
    max_connections: usize,
    listen_backlog: u32,
    credentials: StaticCredentials,
    auth: Option<Arc<dyn Auth>>,
    allow_unauthenticated: bool,
    webhooks: WebhookConfig,
    thread_ttl: crate::retention::ThreadTtlConfig,
    store_ttl: crate::store_ttl::StoreTtlConfig,
    record_cache: usize,
    protocol_buffer: Option<usize>,
    #[cfg(feature = "scale")]
    scale: ScaleSettings,
}

/// What [`ServerBuilder::postgres`] and the like set.
#[cfg(feature = "scale")]
#[derive(Clone)]
struct ScaleSettings {
    database_uri: Option<String>,
    redis_uri: Option<String>,
    prefix: String,
    lease: Duration,
    poll: Duration,
    transaction_pooler: bool,
}

#[cfg(feature = "scale")]
impl Default for ScaleSettings {
    fn default() -> Self {
        Self {
            database_uri: None,
            redis_uri: None,
            prefix: "weft:".to_owned(),
            lease: crate::scale::DEFAULT_LEASE,
            poll: crate::scale::DEFAULT_POLL,
            transaction_pooler: false,
        }
    }
}

#[cfg(feature = "scale")]
impl std::fmt::Debug for ScaleSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Connection strings may hold passwords: only whether they are set.
        f.debug_struct("ScaleSettings")
            .field("database_uri", &self.database_uri.as_ref().map(|_| "<redacted>"))
            .field("redis_uri", &self.redis_uri.as_ref().map(|_| "<redacted>"))
            .field("prefix", &self.prefix)
            .field("lease", &self.lease)
            .field("poll", &self.poll)
            .field("transaction_pooler", &self.transaction_pooler)
            .finish()
    }
}

#[cfg(feature = "scale")]
impl ScaleSettings {
    /// Both connection strings, or neither; one alone is an error.
    fn config(&self) -> Result<Option<crate::scale::ScaleConfig>, ServerError> {
        match (&self.database_uri, &self.redis_uri) {
            (None, None) => Ok(None),
            (Some(database_uri), Some(redis_uri)) => Ok(Some(crate::scale::ScaleConfig {
                database_uri: database_uri.clone(),
                redis_uri: redis_uri.clone(),
                prefix: self.prefix.clone(),
                lease: self.lease,
                poll: self.poll,
                watchdog: None,
                transaction_pooler: self.transaction_pooler,
            })),
            (Some(_), None) => {
                Err(ServerError::ScaleConfig("PostgreSQL is set but Redis is not (REDIS_URI)".into()))
            }
            (None, Some(_)) => {
                Err(ServerError::ScaleConfig("Redis is set but PostgreSQL is not (DATABASE_URI)".into()))
            }
        }
    }
}

/// The v2 protocol's replay buffer: the builder's size, else `LSD_PROTOCOL_V2_BUFFER_SIZE` (`env`, an
/// integer as Python's `int` reads it, spaces and a sign allowed), else 10,000. Anything but a positive
/// integer is a [`ServerError::ProtocolBuffer`], at start (langgraph-api fails at start on a value that is
/// no integer, and on each v2 stream for one below 1).
fn protocol_buffer(set: Option<usize>, env: Option<String>) -> Result<usize, ServerError> {
    let positive = "must be a positive integer";
    match (set, env) {
        (Some(0), _) => Err(ServerError::ProtocolBuffer(format!("the buffer {positive}, got 0"))),
        (Some(events), _) => Ok(events),
        (None, None) => Ok(crate::api::v2::session::DEFAULT_BUFFER),
        (None, Some(text)) => match text.trim().parse::<i128>() {
            Ok(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            Ok(n) => {
                Err(ServerError::ProtocolBuffer(format!("LSD_PROTOCOL_V2_BUFFER_SIZE {positive}, got {n}")))
            }
            Err(_) => Err(ServerError::ProtocolBuffer(format!(
                "LSD_PROTOCOL_V2_BUFFER_SIZE {positive}, got {text:?} (not an integer)"
            ))),
        },
    }
}

impl Default for ServerBuilder {
    fn default() -> Self {
        Self {
            graphs: Vec::new(),
            database: Database::File(PathBuf::from("weft-server.db")),
            body_bytes: DEFAULT_BODY_BYTES,
            concurrent_runs: DEFAULT_CONCURRENT_RUNS,
            keep_alive: DEFAULT_KEEP_ALIVE,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            run_timeout: None,
            run_watchdog: Some(DEFAULT_RUN_WATCHDOG),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            listen_backlog: BACKLOG,
            credentials: StaticCredentials::default(),
            auth: None,
            allow_unauthenticated: false,
            webhooks: WebhookConfig::default(),
            thread_ttl: crate::retention::ThreadTtlConfig::default(),
            store_ttl: crate::store_ttl::StoreTtlConfig::default(),
            record_cache: crate::storage::DEFAULT_CACHE,
            protocol_buffer: None,
            #[cfg(feature = "scale")]
            scale: ScaleSettings::default(),
        }
    }
}

impl ServerBuilder {
    /// Serves `graph` as `graph_id`; an assistant of the same name is made for it at start-up, with
    /// LangGraph's id for it ([`default_assistant_id`]). A compiled graph, or a [`ServerGraph`] with
    /// schemas and a description.
    pub fn graph(mut self, graph_id: impl Into<String>, graph: impl Into<ServerGraph>) -> Self {
        self.graphs.push((graph_id.into(), graph.into()));
        self
    }

    /// Keeps everything in the SQLite file at `path` (created when missing): threads, runs, assistants,
    /// checkpoints and the store. The default is `weft-server.db` in the working directory.
    ///
    /// One process serves a file: [`ServerBuilder::build`] locks it (an operating-system lock on
    /// `<path>.lock`, which holds the process id) and fails with [`ServerError::DatabaseInUse`] while
    /// another process holds it. The lock goes with the process, however it ends.
    pub fn sqlite(mut self, path: impl Into<PathBuf>) -> Self {
        self.database = Database::File(path.into());
        self
    }

    /// Keeps everything in this process's memory, with no database at all, as `langgraph dev` does:
    /// threads, runs, assistants and crons in maps, checkpoints in an [`InMemorySaver`], the store in an
    /// [`InMemoryStore`]. Nothing is written per run, and nothing survives a restart: for development and
    /// tests, not for production.
    ///
    /// [`InMemorySaver`]: weft_graph::InMemorySaver
    /// [`InMemoryStore`]: weft_graph::InMemoryStore
    pub fn in_memory(mut self) -> Self {
        self.database = Database::Memory;
        self
    }

    /// Keeps everything in a SQLite database in memory: the durable mode's code paths (every record and
    /// checkpoint written through SQLite) without a file. Nothing survives the process; meant for testing
    /// the SQLite mode.
    pub fn sqlite_in_memory(mut self) -> Self {
        self.database = Database::SqliteMemory;
        self
    }

    /// The largest request body, in bytes (300 MiB by default, as in LangGraph); larger ones get a `413`,
    /// at once, before any of the body is read, when their `Content-Length` says so.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.body_bytes = bytes;
        self
    }

    /// How long a request's head (its request line and headers) may take to arrive, from its first byte
    /// (30 s by default); a connection whose head is still incomplete then is closed. Heads that never
    /// end hold a connection for no longer than this.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a connection with no request in flight may stay silent (60 s by default): a new
    /// connection until its first byte, a kept-alive one after its last answer. It is then closed.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a request's body may take to arrive, from its head (300 s by default); a body still
    /// incomplete then gets a `408`.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How many connections are served at once (10,000 by default; the process's file descriptor limit
    /// must allow them). Past it, new connections wait in the system's backlog until one closes.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// How many new connections the system holds for [`Server::serve`] before the server accepts them
    /// (1,024 by default; Linux caps it at `net.core.somaxconn`). A burst of connections beyond it is not
    /// refused: their clients send their SYN again 1 s later, then 3 s, so they stall for whole seconds.
    /// The standard library's 128 made 200 clients arriving at once on a busy machine wait up to 3 s.
    pub fn listen_backlog(mut self, connections: u32) -> Self {
        self.listen_backlog = connections.max(1);
        self
    }

    /// How many threads, and how many finished runs, the server keeps in memory past their use (1,000
    /// of each by default); the others stay in the database (SQLite, or PostgreSQL scaled out) and are
    /// read when asked for. Assistants, crons and pending or running runs are always in memory. No
    /// effect in the in-memory mode, where memory is all there is.
    pub fn record_cache(mut self, records: usize) -> Self {
        self.record_cache = records.max(1);
        self
    }

    /// How many events a v2 protocol stream (`/threads/{id}/stream/events`, SSE or WebSocket) keeps for a
    /// reconnect's `since` replay; a `since` older than what is kept is a `resume_gap`. Without it,
    /// `LSD_PROTOCOL_V2_BUFFER_SIZE` as langgraph-api reads it, else 10,000. Zero makes
    /// [`build`](ServerBuilder::build) fail with [`ServerError::ProtocolBuffer`].
    pub fn protocol_v2_buffer(mut self, events: usize) -> Self {
        self.protocol_buffer = Some(events);
        self
    }

    /// How many runs execute at once (256 by default); more wait their turn as `pending`.
    pub fn max_concurrent_runs(mut self, runs: usize) -> Self {
        self.concurrent_runs = runs.max(1);
        self
    }

    /// How long a stream stays quiet before the server sends a heartbeat comment (`: heartbeat`), and
    /// `/wait` and `/join` a newline, to keep the connection open (5 s by default, as LangGraph).
    pub fn keep_alive(mut self, every: Duration) -> Self {
        self.keep_alive = every.max(Duration::from_millis(1));
        self
    }

    /// How long a shutdown may take (10 s by default): running runs drain to their next superstep
    /// boundary, then open requests end (see [`Server::serve_with_shutdown`]); what is still going after
    /// it stops where it is and goes on at the next start from its last checkpoint.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// How long a run may take (no limit by default; LangGraph's `BG_JOB_TIMEOUT_SECS`): a run still going
    /// then stops, ends with status `timeout` and an `error` event (`TimeoutError`), and leaves its thread
    /// `error`, with the checkpoints it saved.
    pub fn run_timeout(mut self, timeout: Duration) -> Self {
        self.run_timeout = Some(timeout);
        self
    }

    /// How long a run may go without progress before it is stopped ([`DEFAULT_RUN_WATCHDOG`], 10 min, by
    /// default; `None`: never). Progress is a superstep, a task's end, or an event streamed (an LLM token
    /// in `messages` mode, a value, an update). A run stuck that long (a node awaiting something that never
    /// answers) ends with status `error`, an `error` event `{"error": "RunStalled", ...}` and its thread
    /// `error`, with the checkpoints it saved; its stream ends. Scaled out, a worker also stops renewing
    /// the lease of a run stalled for the watchdog plus a lease (its task could not even be stopped), so
    /// that another instance takes it over from its last checkpoint. Set it above the longest step that
    /// streams nothing: a model call not streamed counts as one step.
    pub fn run_watchdog(mut self, stall: Option<Duration>) -> Self {
        self.run_watchdog = stall;
        self
    }

    /// Requires an API key (the `x-api-key` header, what LangGraph's SDKs send their `api_key` as): each
    /// `(key, identity)` lets its holder in as the user `identity`. With API keys or bearer tokens, each
    /// user sees only the threads (with their runs and state) and the assistants it made (recorded as
    /// `metadata.owner`), and the assistants the server made for its graphs; the store is shared.
    pub fn api_keys<I, K, U>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = (K, U)>,
        K: Into<String>,
        U: Into<String>,
    {
        for (key, identity) in keys {
            self.credentials.add_api_key(key.into(), identity.into());
        }
        self
    }

    /// Requires a bearer token (`Authorization: Bearer <token>`): each `(token, identity)` lets its holder
    /// in as the user `identity`, as [`ServerBuilder::api_keys`] does (both may be given).
    pub fn bearer_tokens<I, T, U>(mut self, tokens: I) -> Self
    where
        I: IntoIterator<Item = (T, U)>,
        T: Into<String>,
        U: Into<String>,
    {
        for (token, identity) in tokens {
            self.credentials.add_bearer_token(token.into(), identity.into());
        }
        self
    }

    /// Authenticates every request and authorizes every action with `auth` (LangGraph's custom `Auth`);
    /// not to be combined with [`ServerBuilder::api_keys`] or [`ServerBuilder::bearer_tokens`].
    pub fn auth(mut self, auth: impl Auth) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// Lets the server listen on an address other machines can reach (not loopback) without
    /// authentication, which it otherwise refuses to do.
    pub fn allow_unauthenticated(mut self) -> Self {
        self.allow_unauthenticated = true;
        self
    }

    /// How many times a run's webhook is called before giving up when the call fails (no connection, a
    /// timeout, a `5xx` or `429`): 3 by default, as in LangGraph; at least 1.
    pub fn webhook_attempts(mut self, attempts: u32) -> Self {
        self.webhooks.attempts = attempts.max(1);
        self
    }

    /// The waits between a webhook's attempts (doubling from 1 s, at most 60 s, by default).
    pub fn webhook_backoff(mut self, backoff: Backoff) -> Self {
        self.webhooks.backoff = backoff;
        self
    }

    /// How long one webhook call may take (30 s by default, as in LangGraph).
    pub fn webhook_timeout(mut self, timeout: Duration) -> Self {
        self.webhooks.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Lets runs and crons name webhooks on this machine: `localhost`, loopback and unspecified addresses
    /// in any form, and names that resolve to them. Off by default, as in LangGraph
    /// (`webhooks.url.disable_loopback`): a literal one gets a `422` when the run is made, a name is
    /// refused when it resolves so (the call is not made).
    pub fn allow_loopback_webhooks(mut self, allow: bool) -> Self {
        self.webhooks.allow_loopback = allow;
        self
    }

    /// Lets runs and crons name webhooks on private networks: RFC 1918 (`10/8`, `172.16/12`,
    /// `192.168/16`), unique local (`fc00::/7`), link-local (`169.254/16`, cloud metadata services among
    /// them, `fe80::/10`) and shared (CGNAT, `100.64/10`) addresses, and names that resolve to them. Off
    /// by default, so that a caller cannot make the server reach what only it can reach.
    pub fn allow_private_webhooks(mut self, allow: bool) -> Self {
        self.webhooks.allow_private = allow;
        self
    }

    /// Thread TTLs, as `checkpointer.ttl` of LangGraph's `langgraph.json` sets them (read one with
    /// [`crate::ThreadTtlConfig::from_langgraph_json`]): the TTL of threads made without one, its
    /// strategy, and how often expired threads are swept. Without it, only threads given a TTL expire,
    /// and the sweep runs every 5 minutes.
    pub fn thread_ttl(mut self, config: crate::retention::ThreadTtlConfig) -> Self {
        self.thread_ttl = config;
        self
    }

    /// Store TTLs, as `store.ttl` of LangGraph's `langgraph.json` sets them (read one with
    /// [`crate::StoreTtlConfig::from_langgraph_json`]): the TTL of items put without one, whether reads
    /// restart an item's TTL, and how often expired items are deleted. Without it, only items put with a
    /// `ttl` expire, reads refresh them, and the sweep runs every 5 minutes.
    pub fn store_ttl(mut self, config: crate::store_ttl::StoreTtlConfig) -> Self {
        self.store_ttl = config;
        self
    }

    /// Scales out (feature `scale`): keeps threads, runs, assistants, crons, checkpoints and the store in
    /// the PostgreSQL database at `uri` (LangGraph's `DATABASE_URI`) instead of SQLite, shared with every
    /// other instance given the same database; needs [`ServerBuilder::redis`] too. Tables are made at
    /// start-up, safely when several instances start at once.
    #[cfg(feature = "scale")]
    pub fn postgres(mut self, uri: impl Into<String>) -> Self {
        self.scale.database_uri = Some(uri.into());
        self
    }

    /// Says that PostgreSQL ([`ServerBuilder::postgres`]) is reached through a pooler in transaction mode
    /// (PgBouncer's `pool_mode = transaction`, Supavisor's transaction mode) that does not carry prepared
    /// statements (off by default; the environment's `DATABASE_POOL_MODE=transaction` sets it). Every
    /// statement then uses the unnamed prepared statement, and one with parameters runs in a transaction of
    /// its own, so that it reaches a single server connection: two more round trips per such statement.
    /// The server's other state needs no setting: it keeps no session state and no lock past a
    /// transaction, pooler or not. See `docs/server.md`, "Behind a connection pooler".
    #[cfg(feature = "scale")]
    pub fn postgres_transaction_pooler(mut self, on: bool) -> Self {
        self.scale.transaction_pooler = on;
        self
    }

    /// Scales out (feature `scale`): wake-ups, cancels and the runs' event streams go through the Redis
    /// server at `uri` (LangGraph's `REDIS_URI`); needs [`ServerBuilder::postgres`] too.
    #[cfg(feature = "scale")]
    pub fn redis(mut self, uri: impl Into<String>) -> Self {
        self.scale.redis_uri = Some(uri.into());
        self
    }

    /// What every Redis key and channel of this deployment starts with (`weft:` by default; LangGraph's
    /// `REDIS_KEY_PREFIX`): deployments that share a Redis server need one each.
    #[cfg(feature = "scale")]
    pub fn redis_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.scale.prefix = prefix.into();
        self
    }

    /// How long a worker's claim on a run lasts unless renewed (10 s by default; renewed every third of
    /// it): when an instance dies, its runs are taken up by another after this long.
    #[cfg(feature = "scale")]
    pub fn run_lease(mut self, lease: Duration) -> Self {
        self.scale.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// How often an idle worker looks at the run queue when no wake-up came through Redis (1 s by
    /// default).
    #[cfg(feature = "scale")]
    pub fn queue_poll(mut self, every: Duration) -> Self {
        self.scale.poll = every.max(Duration::from_millis(10));
        self
    }

    /// Scales out when the environment says so: `DATABASE_URI` and `REDIS_URI` (both or neither), and
    /// `REDIS_KEY_PREFIX`, as LangGraph's server reads them, and `DATABASE_POOL_MODE` (`transaction`:
    /// see [`ServerBuilder::postgres_transaction_pooler`]; `session`, the default: none). Without them the
    /// builder is unchanged.
    #[cfg(feature = "scale")]
    pub fn scale_from_env(mut self) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(uri) = var("DATABASE_URI") {
            self.scale.database_uri = Some(uri);
        }
        if let Some(uri) = var("REDIS_URI") {
            self.scale.redis_uri = Some(uri);
        }
        if let Some(prefix) = var("REDIS_KEY_PREFIX") {
            self.scale.prefix = prefix;
        }
        if let Some(mode) = var("DATABASE_POOL_MODE") {
            let mode = mode.trim().to_ascii_lowercase();
            if mode != "transaction" && mode != "session" {
                tracing::warn!(mode, "DATABASE_POOL_MODE is `transaction` or `session`: taken as `session`");
            }
            self.scale.transaction_pooler = mode == "transaction";
        }
        self
    }

    /// Opens the database, registers the graphs and their assistants, and picks up the runs a previous
    /// process left unfinished.
    pub async fn build(self) -> Result<Server, ServerError> {
        let has_credentials = !self.credentials.is_empty();
        let auth: Option<Arc<dyn Auth>> = match (self.auth, has_credentials) {
            (Some(_), true) => return Err(ServerError::AuthConflict),
            (Some(auth), false) => Some(auth),
            (None, true) => Some(Arc::new(self.credentials)),
            (None, false) => None,
        };
        let mut seen = std::collections::HashSet::new();
        for (id, _) in &self.graphs {
            if id.is_empty() {
                return Err(ServerError::InvalidGraphId(id.clone()));
            }
            if !seen.insert(id.clone()) {
                return Err(ServerError::DuplicateGraph(id.clone()));
            }
        }
        let protocol_buffer =
            protocol_buffer(self.protocol_buffer, std::env::var("LSD_PROTOCOL_V2_BUFFER_SIZE").ok())?;
        let store_ttl = self.store_ttl.store_config();
        #[cfg(feature = "scale")]
        let scale_config =
            self.scale.config()?.map(|c| crate::scale::ScaleConfig { watchdog: self.run_watchdog, ..c });
        #[cfg(feature = "scale")]
        let (checkpointer, store, records, writer, scale) = match &scale_config {
            Some(config) => {
                let (checkpointer, store, records, scale) =
                    open_scaled(config, self.record_cache, &store_ttl).await?;
                (checkpointer, store, records, None, Some(scale))
            }
            None => {
                let (checkpointer, store, records, writer) =
                    open_sqlite(&self.database, self.record_cache, &store_ttl).await?;
                (checkpointer, store, records, writer, None)
            }
        };
        #[cfg(not(feature = "scale"))]
        let (checkpointer, store, records, writer) =
            open_sqlite(&self.database, self.record_cache, &store_ttl).await?;
        let records = RecordsLock::new(records);
        let mut held = records.lock(Key::All).await?;
        let mut registered = Vec::with_capacity(self.graphs.len());
        let mut changes = Vec::new();
        for (id, spec) in self.graphs {
            let stateful = spec
                .graph
                .with_checkpointer(Some(Arc::clone(&checkpointer)))
                .with_store(Some(Arc::clone(&store)));
            let stateless = spec.graph.with_checkpointer(None).with_store(Some(Arc::clone(&store)));
            let assistant_id = default_assistant_id(&id);
            if !held.assistants.contains_key(&assistant_id) {
                let stamp = now();
                let mut metadata = Map::new();
                metadata.insert("created_by".into(), json!("system"));
                let assistant = Assistant {
                    assistant_id,
                    graph_id: id.clone(),
                    config: Value::Object(Map::new()),
                    context: Value::Object(Map::new()),
                    metadata,
                    name: id.clone(),
                    created_at: stamp.clone(),
                    updated_at: stamp,
                    version: 1,
                    description: spec.description.clone(),
                };
                changes.push(Change::Version(assistant.version_record()));
                changes.push(Change::Assistant(assistant));
            }
            registered.push(Registered { id, spec, stateful, stateless });
        }
        held.commit(changes).await?;
        drop(held);
        let app = Arc::new(App {
            graphs: GraphRegistry::new(registered),
            records,
            checkpointer,
            store,
            channels: Channels::default(),
            thread_taps: crate::runs::taps::ThreadTaps::default(),
            run_slots: Arc::new(Semaphore::new(self.concurrent_runs)),
            limits: Limits {
                body_bytes: self.body_bytes,
                keep_alive: self.keep_alive,
                shutdown_grace: self.shutdown_grace,
                run_timeout: self.run_timeout,
                run_watchdog: self.run_watchdog,
                concurrent_runs: self.concurrent_runs,
                protocol_buffer,
            },
            connections: crate::conn::ConnLimits {
                header_timeout: self.header_timeout,
                idle_timeout: self.idle_timeout,
                body_timeout: self.body_timeout,
                max_connections: self.max_connections,
                backlog: self.listen_backlog,
                body_bytes: self.body_bytes,
            },
            auth,
            webhooks: Arc::new(Webhooks::new(self.webhooks)?),
            cron_wake: tokio::sync::Notify::new(),
            metrics: crate::metrics::RunMetrics::default(),
            drain: weft_graph::RunControl::new(),
            thread_ttl: self.thread_ttl,
            store_ttl: self.store_ttl,
            _writer: writer,
            #[cfg(feature = "scale")]
            scale: scale.clone(),
        });
        #[cfg(feature = "scale")]
        if let Some(scale) = &scale {
            scale.start(&app);
        }
        crate::runs::recover(&app).await?;
        Ok(Server { app, allow_unauthenticated: self.allow_unauthenticated })
    }

    /// Builds the server and serves it on `addr` (`"127.0.0.1:2024"`) until SIGTERM or SIGINT (see
    /// [`Server::serve`]).
    pub async fn serve(self, addr: impl AsRef<str>) -> Result<(), ServerError> {
        self.build().await?.serve(addr).await
    }
}

/// What [`open_sqlite`] opens: checkpointer, store, records, and a file's writer lock.
type Embedded = (Arc<dyn Checkpointer>, Arc<dyn Store>, Records, Option<WriterLock>);

/// The embedded database: checkpointer, store and records in one SQLite file (or a SQLite database in
/// memory), or, in the in-memory mode, no database. A file is locked first: one process per file.
async fn open_sqlite(database: &Database, cache: usize, ttl: &TtlConfig) -> Result<Embedded, ServerError> {
    let (saver, writer) = match database {
        Database::File(path) => {
            let writer = WriterLock::acquire(path)?;
            (SqliteSaver::open(path).await, Some(writer))
        }
        Database::SqliteMemory => (SqliteSaver::in_memory().await, None),
        Database::Memory => {
            let checkpointer: Arc<dyn Checkpointer> = Arc::new(InMemorySaver::new());
            let store: Arc<dyn Store> = Arc::new(InMemoryStore::new().with_ttl(*ttl));
            return Ok((checkpointer, store, Records::memory(), None));
        }
    };
    let saver = saver?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::from_pool(saver.pool().clone()).await?.with_ttl(*ttl));
    let saver = Arc::new(saver);
    let checkpointer: Arc<dyn Checkpointer> = Arc::clone(&saver) as Arc<dyn Checkpointer>;
    // The records go through the saver's queue: a run's record changes and the checkpoints saved at the
    // same time share a transaction.
    Ok((checkpointer, store, Records::open(saver, cache).await?, writer))
}

/// A scaled-out server's state: checkpointer, store and records in PostgreSQL, and its part in the
/// deployment (the run queue's pool, Redis).
#[cfg(feature = "scale")]
async fn open_scaled(
    config: &crate::scale::ScaleConfig,
    cache: usize,
    ttl: &TtlConfig,
) -> Result<(Arc<dyn Checkpointer>, Arc<dyn Store>, Records, Arc<crate::scale::Scale>), ServerError> {
    use weft_integrations::postgres::{PostgresOptions, PostgresSaver, PostgresStore};
    let options = PostgresOptions {
        max_connections: 16,
        prepared_statements: !config.transaction_pooler,
        ..PostgresOptions::default()
    };
    let saver = Arc::new(PostgresSaver::connect_with(&config.database_uri, options.clone()).await?);
    let store = PostgresStore::from_pool(saver.pool().clone(), options).await?.with_ttl(*ttl);
    let (db, bus) = crate::scale::connect(config).await?;
    let records = Records::open_postgres(db.clone(), cache).await?;
    let scale = Arc::new(crate::scale::Scale::new(config, db, bus, Arc::clone(&saver)));
    Ok((saver, Arc::new(store), records, scale))
}

/// A LangGraph Platform API server over weft graphs. See [`ServerBuilder`].
#[derive(Debug, Clone)]
pub struct Server {
    pub(crate) app: Arc<App>,
    allow_unauthenticated: bool,
}

impl Server {
    /// Starts describing a server.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Serves on `addr` (`"127.0.0.1:2024"`) until SIGTERM or SIGINT (Ctrl-C; on platforms without
    /// signals, Ctrl-C), then drains as [`Server::serve_with_shutdown`] describes.
    pub async fn serve(self, addr: impl AsRef<str>) -> Result<(), ServerError> {
        let addr = addr.as_ref();
        let listener = bind(addr, self.app.connections.backlog)
            .await
            .map_err(|source| ServerError::Bind { addr: addr.to_owned(), source })?;
        self.serve_with_shutdown(listener, shutdown_signal()).await
    }

    /// Serves on `listener` until `shutdown` resolves (crons fire while it serves), then drains, for at
    /// most the shutdown grace ([`ServerBuilder::shutdown_grace`], 10 s by default): no new connection
    /// and no new run is taken (runs made meanwhile stay `pending`); each running run stops at its next
    /// superstep boundary, its checkpoint saved, and stays `running` in the records; once they have,
    /// every stream still open ends cleanly (a client resumes it on the next process with
    /// `Last-Event-ID`) and a `/wait` or `/join` still waiting is cut (it joins again). The next start
    /// takes each drained run up from its checkpoint, without running a finished step again; scaled out,
    /// another instance takes it over at once. A run whose step outlasts the grace is stopped where it
    /// is, as by a crash: it too goes on at the next start, from its last checkpoint.
    pub async fn serve_with_shutdown<F>(self, listener: TcpListener, shutdown: F) -> Result<(), ServerError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Ok(local) = listener.local_addr() {
            if self.app.auth.is_none() && !self.allow_unauthenticated && !local.ip().is_loopback() {
                return Err(ServerError::Unauthenticated { addr: local.to_string() });
            }
        }
        let router = crate::api::router(Arc::clone(&self.app));
        let stopping = Arc::new(tokio::sync::Notify::new());
        let signal = Arc::clone(&stopping);
        let shutdown = async move {
            shutdown.await;
            signal.notify_one();
        };
        let serving = crate::conn::serve(listener, router, self.app.connections, shutdown);
        // Crons fire while the server serves.
        let scheduler = AbortOnDrop(tokio::spawn(crate::crons::run_scheduler(Arc::clone(&self.app))));
        // Expired threads are swept while the server serves.
        let sweeper = AbortOnDrop(tokio::spawn(crate::retention::run_sweeper(Arc::clone(&self.app))));
        // And expired store items.
        let store_sweeper = weft_graph::store::spawn_ttl_sweeper(
            Arc::clone(&self.app.store),
            self.app.store_ttl.sweep_interval,
        );
        let drained = async {
            stopping.notified().await;
            drain(&self.app).await
        };
        tokio::pin!(serving, drained);
        let mut served = None;
        let mut deadline = None;
        let result = loop {
            tokio::select! {
                () = &mut serving, if served.is_none() => {
                    if deadline.is_some() {
                        break Ok(());
                    }
                    served = Some(());
                }
                at = &mut drained, if deadline.is_none() => {
                    if served.is_some() {
                        break Ok(());
                    }
                    deadline = Some(at);
                }
                () = sleep_until(deadline), if deadline.is_some() => {
                    tracing::info!(grace = ?self.app.limits.shutdown_grace, "requests still open after the shutdown grace: stopping anyway");
                    break Ok(());
                }
            }
        };
        drop(scheduler);
        drop(sweeper);
        store_sweeper.stop();
        result
    }
}

/// How many connections wait in the system for the server to accept them.
const BACKLOG: u32 = 1024;

/// Listens on `addr` with `backlog` ([`BACKLOG`] by default; the standard library's is 128: a burst of new
/// connections beyond it waits for the client's SYN to be sent again, a second later).
async fn bind(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let mut last = None;
    for address in tokio::net::lookup_host(addr).await? {
        let socket = if address.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket.bind(address).and_then(|()| socket.listen(backlog)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last
        .unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")))
}

/// Sleeps until `deadline` (forever without one).
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Drains the server for a shutdown (see [`Server::serve_with_shutdown`]): asks every run to stop at its
/// next superstep boundary, waits for them (at most the grace), then ends the streams still open.
/// Returns when the grace ends.
async fn drain(app: &Arc<App>) -> tokio::time::Instant {
    let grace = app.limits.shutdown_grace;
    let deadline = tokio::time::Instant::now() + grace;
    tracing::info!(?grace, "shutting down: draining the runs");
    app.drain.request_drain();
    // Every run slot back: no run is going.
    let all = u32::try_from(app.limits.concurrent_runs).unwrap_or(u32::MAX);
    match tokio::time::timeout_at(deadline, app.run_slots.acquire_many(all)).await {
        Ok(_) => tracing::info!("every run is drained"),
        Err(_) => tracing::warn!(
            ?grace,
            "runs still in a step after the shutdown grace: they go on at the next start from their last checkpoint"
        ),
    }
    app.channels.drain_all();
    deadline
}

/// Resolves at SIGTERM or SIGINT (Ctrl-C); where there are no such signals, at Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM"),
                    _ = int.recv() => tracing::info!("SIGINT"),
                }
                return;
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM and SIGINT: stopping at Ctrl-C only");
            }
        }
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!(error = %e, "cannot listen for Ctrl-C: serving until the process is stopped");
        std::future::pending::<()>().await;
    }
}

/// Stops a task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{ServerError, protocol_buffer};

    #[test]
    fn the_protocol_buffer_is_read_as_langgraph_api_reads_it_and_bad_sizes_are_typed_errors() {
        assert_eq!(protocol_buffer(None, None).unwrap(), 10_000);
        assert_eq!(protocol_buffer(None, Some(" +250 ".into())).unwrap(), 250);
        assert_eq!(protocol_buffer(Some(7), Some("x".into())).unwrap(), 7, "the builder's size first");
        let text = |r: Result<usize, ServerError>| match r {
            Err(ServerError::ProtocolBuffer(why)) => why,
            other => panic!("expected a ProtocolBuffer error, got {other:?}"),
        };
        assert_eq!(
            text(protocol_buffer(None, Some("lots".into()))),
            "LSD_PROTOCOL_V2_BUFFER_SIZE must be a positive integer, got \"lots\" (not an integer)"
        );
        assert_eq!(
            text(protocol_buffer(None, Some("0".into()))),
            "LSD_PROTOCOL_V2_BUFFER_SIZE must be a positive integer, got 0"
        );
        assert!(text(protocol_buffer(None, Some("-3".into()))).ends_with("got -3"));
        assert!(text(protocol_buffer(None, Some(String::new()))).contains("not an integer"));
        assert_eq!(text(protocol_buffer(Some(0), None)), "the buffer must be a positive integer, got 0");
    }

    /// Connects 600 times at once to a listener with `backlog` that accepts nothing; returns how many
    /// handshakes completed within 700 ms (the others' SYN was dropped: their clients send it again 1 s
    /// later).
    async fn held_of_600(backlog: u32) -> usize {
        let listener = super::bind("127.0.0.1:0", backlog).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connects: Vec<_> = (0..600)
            .map(|_| {
                tokio::spawn(tokio::time::timeout(
                    Duration::from_millis(700),
                    tokio::net::TcpStream::connect(addr),
                ))
            })
            .collect();
        let mut held = Vec::new();
        for connect in connects {
            if let Ok(Ok(Ok(stream))) = connect.await {
                held.push(stream);
            }
        }
        drop(listener);
        held.len()
    }

    /// A burst of connections the server has not accepted yet waits in the listener's queue: with the
    /// standard library's backlog of 128, the SYNs of those past it are dropped and sent again 1 s and
    /// 3 s later (a burst of clients then sees a stall of whole seconds: 200 streamed runs started at
    /// once ended after 3 s where they take 1 s); with [`super::BACKLOG`], 600 connections all complete
    /// their handshake at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_connections_is_held_by_the_backlog_not_dropped() {
        assert_eq!(held_of_600(super::BACKLOG).await, 600, "connections whose SYN was not dropped");
        let small = held_of_600(128).await;
        assert!(small < 600, "with the standard library's backlog, some SYNs are dropped ({small} held)");
    }
}
