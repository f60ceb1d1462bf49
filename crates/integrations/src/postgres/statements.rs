//! Statements of the PostgreSQL saver's writes and whole-thread operations, and of the store.

/// `$1` thread, `$2` namespace, `$3` id, `$4` parent, `$5` body, `$6` metadata; whole values `$7-$9`;
/// deltas `$10-$13` (channel, version, base, blob).
pub(super) const PUT: &str = r#"
WITH ok AS (
    SELECT count(*) = cardinality($12::text[]) AS ok FROM checkpoint_blobs b
    JOIN unnest($10::text[], $12::text[]) AS d(channel, base) ON b.channel = d.channel AND b.version = d.base
    WHERE b.thread_key = md5($1)::uuid AND b.ns_key = md5($2)::uuid AND b.thread_id = $1 AND b.checkpoint_ns = $2
),
cp AS (
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    SELECT $1, $2, $3, $4, $5::jsonb, $6::jsonb FROM ok WHERE ok.ok
    ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
        metadata = excluded.metadata
    WHERE checkpoints.thread_id = excluded.thread_id AND checkpoints.checkpoint_ns = excluded.checkpoint_ns
    RETURNING 1
),
whole AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, blob)
    SELECT $1, $2, t.channel, t.version, t.blob
    FROM unnest($7::text[], $8::text[], $9::bytea[]) AS t(channel, version, blob), ok WHERE ok.ok
    ON CONFLICT DO NOTHING
),
delta AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
    SELECT $1, $2, d.channel, d.version, d.base, d.blob
    FROM unnest($10::text[], $11::text[], $12::text[], $13::bytea[]) AS d(channel, version, base, blob), ok
    WHERE ok.ok
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM cp"#;

pub(super) const PUT_WRITES: &str = r#"
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, blob)
SELECT $1, $2, $3, $4, $5, w.idx, w.channel, w.blob
FROM unnest($6::bigint[], $7::text[], $8::bytea[]) AS w(idx, channel, blob)
ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
    task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
    AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns"#;

pub(super) const DELETE: &str = r#"
WITH a AS (DELETE FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1),
     b AS (DELETE FROM checkpoint_blobs WHERE thread_key = md5($1)::uuid AND thread_id = $1)
DELETE FROM checkpoint_writes WHERE thread_key = md5($1)::uuid AND thread_id = $1"#;

/// The (channel, version) pairs of the checkpoint row `$alias` (none when its `channel_versions` is not an
/// object).
macro_rules! channel_versions {
    ($alias:literal) => {
        concat!(
            "jsonb_each_text(CASE WHEN jsonb_typeof(",
            $alias,
            ".checkpoint -> 'channel_versions') = 'object' THEN ",
            $alias,
            ".checkpoint -> 'channel_versions' ELSE '{}'::jsonb END)"
        )
    };
}

/// `prune`'s first step: keeps the newest `$2` checkpoints per namespace of thread `$1` and their writes.
pub(super) const PRUNE_CHECKPOINTS: &str = r#"
WITH ranked AS (
    SELECT checkpoint_ns, checkpoint_id,
        row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn
    FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1
),
dropped AS (
    DELETE FROM checkpoints c USING ranked r
    WHERE c.thread_key = md5($1)::uuid AND c.thread_id = $1 AND c.checkpoint_ns = r.checkpoint_ns
        AND c.checkpoint_id = r.checkpoint_id AND r.rn > $2
)
DELETE FROM checkpoint_writes w WHERE w.thread_key = md5($1)::uuid AND w.thread_id = $1
    AND NOT EXISTS (SELECT 1 FROM ranked r WHERE r.rn <= $2 AND r.checkpoint_ns = w.checkpoint_ns
        AND r.checkpoint_id = w.checkpoint_id)"#;

/// The kept values of thread `$1` stored as deltas on a version no kept checkpoint lists (flagged), with
/// every row of their chains, for `prune` to store them whole (see `sql::prune`).
pub(super) const PRUNE_CHAINS: &str = concat!(
    r#"
WITH RECURSIVE kept AS (
    SELECT DISTINCT c.checkpoint_ns AS ns, v.key COLLATE "C" AS channel, v.value COLLATE "C" AS version
    FROM checkpoints c, "#,
    channel_versions!("c"),
    r#" v
    WHERE c.thread_key = md5($1)::uuid AND c.thread_id = $1
),
target AS (
    SELECT b.checkpoint_ns AS ns, b.channel, b.version FROM kept k JOIN checkpoint_blobs b
        ON b.thread_key = md5($1)::uuid AND b.ns_key = md5(k.ns)::uuid AND b.thread_id = $1
        AND b.checkpoint_ns = k.ns AND b.channel = k.channel AND b.version = k.version
    WHERE b.base_version IS NOT NULL AND NOT EXISTS (SELECT 1 FROM kept k2
        WHERE k2.ns = b.checkpoint_ns AND k2.channel = b.channel AND k2.version = b.base_version)
),
chain(ns, channel, version) AS (
    SELECT ns, channel, version FROM target
    UNION
    SELECT b.checkpoint_ns, b.channel, b.base_version FROM chain JOIN checkpoint_blobs b
        ON b.thread_key = md5($1)::uuid AND b.ns_key = md5(chain.ns)::uuid AND b.thread_id = $1
        AND b.checkpoint_ns = chain.ns AND b.channel = chain.channel AND b.version = chain.version
    WHERE b.base_version IS NOT NULL
)
SELECT b.checkpoint_ns, b.channel, b.version, b.base_version, b.blob,
    EXISTS (SELECT 1 FROM target t WHERE t.ns = b.checkpoint_ns AND t.channel = b.channel
        AND t.version = b.version)
FROM chain JOIN checkpoint_blobs b
    ON b.thread_key = md5($1)::uuid AND b.ns_key = md5(chain.ns)::uuid AND b.thread_id = $1
    AND b.checkpoint_ns = chain.ns AND b.channel = chain.channel AND b.version = chain.version"#
);

/// Stores kept deltas of thread `$1` whole at their versions: `$2-$5` namespace, channel, version, value.
pub(super) const PRUNE_WHOLE: &str = r#"
UPDATE checkpoint_blobs b SET base_version = NULL, blob = u.blob
FROM unnest($2::text[], $3::text[], $4::text[], $5::bytea[]) AS u(ns, channel, version, blob)
WHERE b.thread_key = md5($1)::uuid AND b.ns_key = md5(u.ns)::uuid AND b.thread_id = $1
    AND b.checkpoint_ns = u.ns AND b.channel = u.channel AND b.version = u.version"#;

/// Drops the values of thread `$1` no checkpoint lists. Once the kept deltas are stored whole, that is
/// every row but the kept checkpoints' values; the chains are still followed, so a delta never loses its
/// base (one whose chain could not be read, or one a concurrent save stored meanwhile).
pub(super) const PRUNE_BLOBS: &str = concat!(
    r#"
WITH RECURSIVE keep(ns, channel, version) AS (
    SELECT c.checkpoint_ns, v.key COLLATE "C", v.value COLLATE "C" FROM checkpoints c, "#,
    channel_versions!("c"),
    r#" v
    WHERE c.thread_key = md5($1)::uuid AND c.thread_id = $1
    UNION
    SELECT b.checkpoint_ns, b.channel, b.base_version FROM keep k JOIN checkpoint_blobs b
        ON b.thread_key = md5($1)::uuid AND b.ns_key = md5(k.ns)::uuid AND b.thread_id = $1
        AND b.checkpoint_ns = k.ns AND b.channel = k.channel AND b.version = k.version
    WHERE b.base_version IS NOT NULL
)
DELETE FROM checkpoint_blobs b WHERE b.thread_key = md5($1)::uuid AND b.thread_id = $1
    AND NOT EXISTS (SELECT 1 FROM keep k WHERE k.ns = b.checkpoint_ns AND k.channel = b.channel
        AND k.version = b.version)"#
);

pub(super) const HAS_CHECKPOINTS: &str =
    "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_key = md5($1)::uuid AND thread_id = $1)";

pub(super) const COPY: [&str; 3] = [
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) \
     SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata FROM checkpoints \
     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob) \
     SELECT $2, checkpoint_ns, channel, version, base_version, blob FROM checkpoint_blobs \
     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
    "INSERT INTO checkpoint_writes \
     (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob) \
     SELECT $2, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, blob FROM checkpoint_writes \
     WHERE thread_key = md5($1)::uuid AND thread_id = $1",
];

macro_rules! under_prefix {
    ($select:literal, $tail:literal) => {
        (
            concat!($select, " WHERE (expires_at IS NULL OR expires_at > $1) ", $tail, " LIMIT $2"),
            concat!(
                $select,
                " WHERE (expires_at IS NULL OR expires_at > $1) AND ((prefix_key = md5($2)::uuid AND prefix = $2) \
                 OR (left(prefix, 256) >= left($3, 256) AND left(prefix, 256) <= left($4, 256) \
                 AND prefix >= $3 AND prefix < $4)) ",
                $tail,
                " LIMIT $5"
            ),
        )
    };
}

/// Live items (`$1` now), all or under a prefix (`$2` exact, `$3`-`$4` the range of children), at most
/// the last parameter's count (null: all).
pub(super) const SEARCH: (&str, &str) = under_prefix!(
    "SELECT prefix, key, value, created_at, updated_at, ttl_micros FROM store_items",
    "ORDER BY seq DESC"
);

pub(super) const NAMESPACES: (&str, &str) = under_prefix!("SELECT DISTINCT prefix FROM store_items", "");

pub(super) const VECTORS: (&str, &str) = under_prefix!(
    "SELECT prefix, key, embedding FROM (SELECT i.prefix, i.key, i.prefix_key, i.expires_at, v.idx, \
     v.embedding FROM store_vectors v JOIN store_items i ON i.prefix_key = v.prefix_key \
     AND i.key_key = v.key_key) AS items",
    "ORDER BY idx"
);

pub(super) const PUT_ITEM: &str = r#"
WITH item AS (
    INSERT INTO store_items (prefix, key, value, created_at, updated_at, expires_at, ttl_micros)
    VALUES ($1, $2, $3, $4, $4, $5, $6)
    ON CONFLICT (prefix_key, key_key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,
        seq = nextval('store_seq'), expires_at = excluded.expires_at, ttl_micros = excluded.ttl_micros,
        created_at = CASE WHEN store_items.expires_at IS NOT NULL AND store_items.expires_at <= excluded.updated_at
            THEN excluded.created_at ELSE store_items.created_at END
    WHERE store_items.prefix = excluded.prefix AND store_items.key = excluded.key
    RETURNING prefix_key, key_key
),
gone AS (
    DELETE FROM store_vectors WHERE prefix_key = md5($1)::uuid AND key_key = md5($2)::uuid
        AND idx >= cardinality($7::bigint[])
)
INSERT INTO store_vectors (prefix_key, key_key, idx, embedding)
SELECT item.prefix_key, item.key_key, v.idx, v.embedding
FROM item, unnest($7::bigint[], $8::bytea[]) AS v(idx, embedding)
ON CONFLICT (prefix_key, key_key, idx) DO UPDATE SET embedding = excluded.embedding"#;

pub(super) const REFRESH: &str = "UPDATE store_items s SET expires_at = $3 + s.ttl_micros \
    FROM unnest($1::text[], $2::text[]) AS k(prefix, key) \
    WHERE s.prefix_key = md5(k.prefix)::uuid AND s.key_key = md5(k.key)::uuid AND s.prefix = k.prefix \
    AND s.key = k.key AND s.ttl_micros IS NOT NULL";
