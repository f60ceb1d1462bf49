//! Checkpoints and long-term memory on plain Redis (feature `redis`): [`RedisSaver`] and [`RedisStore`].
//!
//! LangGraph's Redis saver needs Redis Stack (RediSearch and RedisJSON) and fails on plain Redis; this one
//! uses only core data structures and commands of Redis 6.2 or newer (Valkey too), on a standalone server
//! (not Redis Cluster: a thread's keys are written in one transaction and walked by server-side scripts).
//!
//! # Key layout
//! With prefix `P`, thread `T` and namespace `N` (escaped: `%` as `%25`, `:` as `%3A`):
//!
//! | key                  | type       | holds                                                        |
//! | -------------------- | ---------- | ------------------------------------------------------------ |
//! | `P:threads`          | set        | every thread id (for `list(None)`)                           |
//! | `P:t:T:keys`         | set        | the suffix (after `P:t:T:`) of every other key of the thread  |
//! | `P:t:T:ns`           | set        | the thread's namespaces                                      |
//! | `P:t:T:n:N:ids`      | sorted set | checkpoint ids, score 0: ordered by id, so by time (UUID v7) |
//! | `P:t:T:n:N:c:ID`     | hash       | `format`, `checkpoint` (without values), `metadata`, `parent` |
//! | `P:t:T:n:N:blobs`    | hash       | `channel:version` to the value, stored once per version      |
//! | `P:t:T:n:N:bases`    | hash       | `channel:version` of an appended value to its base's field   |
//! | `P:t:T:n:N:w:ID`     | hash       | `task_id:idx` to a pending write of checkpoint `ID`          |
//!
//! `put` stores only the values of the channels in `new_versions` (`HSETNX`: a version is written once),
//! so an unchanged channel is never stored again; reads rebuild every value from the versions a
//! checkpoint lists. A list that extends the channel's previous list (a message list) is stored as the
//! appended elements and the version they extend, with a whole copy every 64 versions
//! ([`RedisOptions::deltas`]), so a thread of 1,000 messages does not store 1,000 copies of its
//! list. The saver takes the engine's appends (`stores_appends`): a list a step only appended to arrives
//! as its new items and is stored as they are, and every 64th such version is stored whole from the
//! parent checkpoint's list. A `put` is one server-side script and a `put_writes` one `MULTI`/`EXEC` transaction. Regular
//! writes are inserted if absent (`HSETNX`), special ones (error, interrupt, resume) replace (`HSET`).
//!
//! # Values
//! JSON with a format version (see `codec.rs`: `{"format": 1, "value": ...}`). A value that cannot be
//! read back (bad or truncated JSON, an unknown format version, a missing version) is
//! [`CheckpointError::Corrupt`](weft_graph::checkpoint::CheckpointError::Corrupt) naming the thread,
//! checkpoint and channel; nothing is ever read as a default.
//!
//! # Server settings the saver needs
//! Redis is the only copy of the checkpoints, so the server must keep them:
//! - **persistence**: `appendonly yes` (with `appendfsync everysec`, the default, a crash loses at most
//!   about a second of saves; `always` loses none) or at least RDB snapshots, accepting the loss of what
//!   came after the last one;
//! - **no eviction**: `maxmemory-policy noeviction` (the default), or no `maxmemory` limit. Under an
//!   `allkeys-*` policy, or a `volatile-*` one with [`RedisOptions::ttl`] set, the server may drop keys
//!   when it fills up. [`RedisSaver::connect_with`] checks this and logs a warning (it does not refuse:
//!   managed services sometimes fix the policy) when the server may evict the saver's keys.
//!
//! # Damaged data
//! A key lost outside the saver (evicted, deleted by hand) or holding another type never reads as a
//! shorter or empty thread: a checkpoint hash gone while the index lists it, an index gone while the
//! thread's registry lists it, pending writes gone while the registry lists them, and a key of the wrong
//! type are [`CheckpointError::Corrupt`](weft_graph::checkpoint::CheckpointError::Corrupt) naming the
//! thread (and the checkpoint where one is hit). Other threads still read, and
//! [`delete_thread`](weft_graph::checkpoint::Checkpointer::delete_thread) removes the damaged one.
//!
//! # One run per thread
//! A checkpoint whose expected head
//! ([`ExpectedHead`](weft_graph::checkpoint::ExpectedHead)) is not the namespace's latest id is refused
//! by the put script itself (atomically, with nothing written) as a
//! [`Conflict`](weft_graph::checkpoint::CheckpointErrorKind::Conflict).
//!
//! # TTL
//! With [`RedisOptions::ttl`], every key of a thread gets the TTL on every write (in the same
//! transaction) and, unless [`refresh_on_read`](RedisOptions::refresh_on_read) is off, on every
//! read: a thread expires whole, `ttl` after it was last used. A refresh touches every key of the thread
//! (about two per checkpoint), so pair long threads with a retention policy.
//!
//! # Connections
//! One multiplexed connection that reconnects by itself; commands failing with a transient error are
//! tried again with backoff (every command is idempotent), and fail as
//! [`Unavailable`](weft_graph::checkpoint::CheckpointErrorKind::Unavailable) (retryable) once the retries
//! are spent. The URL's password never appears in `Debug`
//! output, errors or logs.
//!
//! ```no_run
//! use std::time::Duration;
//! use weft_integrations::redis::{RedisSaver, RedisOptions};
//! # async fn run() -> Result<(), weft_graph::checkpoint::CheckpointError> {
//! let options = RedisOptions::new("redis://127.0.0.1:6379").prefix("myapp").ttl(Duration::from_secs(86_400));
//! let saver = RedisSaver::connect_with(options).await?;
//! # let _ = saver; Ok(()) }
//! ```

mod codec;
mod conn;
mod delta;
mod keys;
mod options;
mod read;
mod saver;
mod store;
mod store_search;
mod thread_ops;
mod write;

pub use options::RedisOptions;
pub use saver::RedisSaver;
pub use store::RedisStore;
