//! The SQLite schema, as migration steps.

use crate::sql::migrate::Migration;

/// The table that records applied steps (`readable_from`: see
/// [`Migration::readable_from`](crate::sql::migrate::Migration::readable_from)).
pub(super) const MIGRATIONS_TABLE: &str = "
CREATE TABLE IF NOT EXISTS weft_migrations (
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    applied_at INTEGER NOT NULL,
    readable_from INTEGER,
    PRIMARY KEY (component, version)
)";

/// Whether `weft_migrations` has its `readable_from` column (tables made before it lack it).
pub(super) const HAS_READABLE_FROM: &str =
    "SELECT count(*) FROM pragma_table_info('weft_migrations') WHERE name = 'readable_from'";

/// Adds the column to a table made before it.
pub(super) const ADD_READABLE_FROM: &str = "ALTER TABLE weft_migrations ADD COLUMN readable_from INTEGER";

/// Steps of the checkpointer's tables.
pub(super) const CHECKPOINT: &[Migration] = &[
    Migration {
        version: 1,
        readable_from: 0,
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
    },
    Migration {
        version: 2,
        readable_from: 2,
        name: "scalar channel values kept in the checkpoint's record, not as blob rows",
        // No table changes: from this step on, a checkpoint's `channel_values` holds the values of its
        // channels that are small scalars (`is_inline_scalar`), and those versions get no blob row.
        // Builds before it would look for those rows and fail to read the checkpoint, so they refuse the
        // file instead.
        sql: "SELECT 1 WHERE 0",
    },
];

/// Steps of the store's tables.
pub(super) const STORE: &[Migration] = &[Migration {
    version: 1,
    readable_from: 0,
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
