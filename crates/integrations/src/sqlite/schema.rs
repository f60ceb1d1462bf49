//! The SQLite schema, as migration steps.

use crate::sql::migrate::Migration;

/// The table that records applied steps.
pub(super) const MIGRATIONS_TABLE: &str = "
CREATE TABLE IF NOT EXISTS weft_migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (component, version)
)";

/// Steps of the checkpointer's tables.
pub(super) const CHECKPOINT: &[Migration] = &[Migration {
    version: 1,
    name: "checkpoints, blobs per channel version (with delta bases), pending writes",
    sql: "
CREATE TABLE checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    checkpoint TEXT NOT NULL,
    metadata TEXT NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX checkpoints_by_id ON checkpoints (checkpoint_id);
CREATE TABLE checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    base_version TEXT,
    blob BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
);
CREATE TABLE checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    blob BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);",
}];

/// Steps of the store's tables.
pub(super) const STORE: &[Migration] = &[Migration {
    version: 1,
    name: "store items (namespace text, TTL, update order) and vectors",
    sql: "
CREATE TABLE store_items (
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    expires_at INTEGER,
    ttl_micros INTEGER,
    PRIMARY KEY (prefix, key)
);
CREATE INDEX store_items_by_seq ON store_items (seq);
CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE store_vectors (
    prefix TEXT NOT NULL,
    key TEXT NOT NULL,
    idx INTEGER NOT NULL,
    embedding BLOB NOT NULL,
    PRIMARY KEY (prefix, key, idx),
    FOREIGN KEY (prefix, key) REFERENCES store_items (prefix, key) ON DELETE CASCADE
);",
}];
