//! Statements of the SQLite saver's writes and whole-thread operations, and of the store.

pub(super) const PUT_CHECKPOINT: &str = "INSERT INTO checkpoints \
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET \
    parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint, \
    metadata = excluded.metadata";

pub(super) const PUT_BLOB: &str = "INSERT INTO checkpoint_blobs \
    (thread_id, checkpoint_ns, channel, version, base_version, blob) VALUES (?1, ?2, ?3, ?4, NULL, ?5) \
    ON CONFLICT DO NOTHING";

/// A delta, stored only while its base is there.
pub(super) const PUT_DELTA: &str = "INSERT INTO checkpoint_blobs \
    (thread_id, checkpoint_ns, channel, version, base_version, blob) SELECT ?1, ?2, ?3, ?4, ?5, ?6 \
    WHERE EXISTS (SELECT 1 FROM checkpoint_blobs WHERE thread_id = ?1 AND checkpoint_ns = ?2 \
    AND channel = ?3 AND version = ?5) ON CONFLICT DO NOTHING";

pub(super) const PUT_WRITE: &str = "INSERT INTO checkpoint_writes \
    (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET \
    task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob WHERE excluded.idx < 0";

pub(super) const PRUNE_CHECKPOINTS: &str = "DELETE FROM checkpoints WHERE rowid IN (\
    SELECT rowid FROM (SELECT rowid, row_number() OVER \
    (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn FROM checkpoints WHERE thread_id = ?1) \
    WHERE rn > ?2)";

pub(super) const PRUNE_WRITES: &str = "DELETE FROM checkpoint_writes WHERE thread_id = ?1 AND NOT EXISTS (\
    SELECT 1 FROM checkpoints c WHERE c.thread_id = ?1 AND c.checkpoint_ns = checkpoint_writes.checkpoint_ns \
    AND c.checkpoint_id = checkpoint_writes.checkpoint_id)";

/// The kept values stored as deltas on a version no kept checkpoint lists (flagged), with every row of
/// their chains, for `prune` to store them whole (see `sql::prune`).
pub(super) const PRUNE_CHAINS: &str = "
WITH RECURSIVE kept(ns, channel, version) AS (
    SELECT DISTINCT c.checkpoint_ns, v.key, v.value
    FROM checkpoints c, json_each(c.checkpoint, '$.channel_versions') v WHERE c.thread_id = ?1
),
target(ns, channel, version) AS (
    SELECT b.checkpoint_ns, b.channel, b.version FROM kept CROSS JOIN checkpoint_blobs b
        ON b.thread_id = ?1 AND b.checkpoint_ns = kept.ns AND b.channel = kept.channel AND b.version = kept.version
    WHERE b.base_version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM kept k
        WHERE k.ns = b.checkpoint_ns AND k.channel = b.channel AND k.version = b.base_version)
),
chain(ns, channel, version) AS (
    SELECT ns, channel, version FROM target
    UNION
    SELECT b.checkpoint_ns, b.channel, b.base_version FROM chain CROSS JOIN checkpoint_blobs b
        ON b.thread_id = ?1 AND b.checkpoint_ns = chain.ns AND b.channel = chain.channel AND b.version = chain.version
    WHERE b.base_version IS NOT NULL
)
SELECT CAST(b.checkpoint_ns AS TEXT), CAST(b.channel AS TEXT), CAST(b.version AS TEXT),
    CAST(b.base_version AS TEXT), CAST(b.blob AS BLOB),
    EXISTS (SELECT 1 FROM target t WHERE t.ns = b.checkpoint_ns AND t.channel = b.channel AND t.version = b.version)
FROM chain CROSS JOIN checkpoint_blobs b
    ON b.thread_id = ?1 AND b.checkpoint_ns = chain.ns AND b.channel = chain.channel AND b.version = chain.version";

/// Stores a kept delta whole at its version: `?5` the whole value.
pub(super) const PRUNE_WHOLE: &str = "UPDATE checkpoint_blobs SET base_version = NULL, blob = ?5 \
    WHERE thread_id = ?1 AND checkpoint_ns = ?2 AND channel = ?3 AND version = ?4";

/// Drops blobs no kept checkpoint lists. Once the kept deltas are stored whole, that is every row but the
/// kept checkpoints' values; the chains are still followed, so a delta never loses its base (one whose
/// chain could not be read and was left as it is).
pub(super) const PRUNE_BLOBS: &str = "
WITH RECURSIVE keep(ns, channel, version) AS (
    SELECT c.checkpoint_ns, v.key, v.value FROM checkpoints c, json_each(c.checkpoint, '$.channel_versions') v
    WHERE c.thread_id = ?1
    UNION
    SELECT b.checkpoint_ns, b.channel, b.base_version FROM keep JOIN checkpoint_blobs b
        ON b.thread_id = ?1 AND b.checkpoint_ns = keep.ns AND b.channel = keep.channel AND b.version = keep.version
    WHERE b.base_version IS NOT NULL
)
DELETE FROM checkpoint_blobs WHERE thread_id = ?1 AND NOT EXISTS (
    SELECT 1 FROM keep WHERE keep.ns = checkpoint_blobs.checkpoint_ns AND keep.channel = checkpoint_blobs.channel
    AND keep.version = checkpoint_blobs.version)";

pub(super) const DELETE: [&str; 3] = [
    "DELETE FROM checkpoints WHERE thread_id = ?1",
    "DELETE FROM checkpoint_blobs WHERE thread_id = ?1",
    "DELETE FROM checkpoint_writes WHERE thread_id = ?1",
];

pub(super) const COPY: [&str; 3] = [
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) \
     SELECT ?2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints \
     WHERE thread_id = ?1",
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob) \
     SELECT ?2, checkpoint_ns, channel, version, base_version, blob FROM checkpoint_blobs WHERE thread_id = ?1",
    "INSERT INTO checkpoint_writes \
     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob) \
     SELECT ?2, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob FROM checkpoint_writes \
     WHERE thread_id = ?1",
];

pub(super) const HAS_CHECKPOINTS: &str = "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = ?1)";

pub(super) const SEARCH: &str = "SELECT prefix, key, value, created_at, updated_at, ttl_micros FROM store_items \
    WHERE (?1 OR prefix = ?2 OR (prefix >= ?3 AND prefix < ?4)) AND (expires_at IS NULL OR expires_at > ?5) \
    ORDER BY seq DESC";

pub(super) const VECTORS: &str = "SELECT prefix, key, embedding FROM store_vectors \
    WHERE (?1 OR prefix = ?2 OR (prefix >= ?3 AND prefix < ?4)) ORDER BY prefix, key, idx";

pub(super) const NAMESPACES: &str = "SELECT DISTINCT prefix FROM store_items \
    WHERE (?1 OR prefix = ?2 OR (prefix >= ?3 AND prefix < ?4)) AND (expires_at IS NULL OR expires_at > ?5)";

pub(super) const PUT_ITEM: &str = "INSERT INTO store_items \
    (prefix, key, value, created_at, updated_at, seq, expires_at, ttl_micros) \
    VALUES (?1, ?2, ?3, ?4, ?4, (SELECT coalesce(max(seq), 0) + 1 FROM store_items), ?5, ?6) \
    ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, \
    seq = excluded.seq, expires_at = excluded.expires_at, ttl_micros = excluded.ttl_micros, \
    created_at = CASE WHEN store_items.expires_at IS NOT NULL AND store_items.expires_at <= excluded.updated_at \
    THEN excluded.created_at ELSE store_items.created_at END";

pub(super) const REFRESH: &str = "UPDATE store_items SET expires_at = ?3 + ttl_micros \
    WHERE prefix = ?1 AND key = ?2 AND ttl_micros IS NOT NULL";

/// The head of a thread and namespace: its greatest checkpoint id (`NULL`: none).
pub(super) const HEAD: &str =
    "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?1 AND checkpoint_ns = ?2";
