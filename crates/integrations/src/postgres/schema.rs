//! The PostgreSQL schema, as migration steps.
//!
//! Key columns use the "C" collation (byte order, as weft compares ids) and rows are keyed by the MD5 of
//! their thread id and namespace (store items: of their namespace text and key), so ids of any length fit
//! in a B-tree index. Store namespace ranges use an index on the first 256 characters of the namespace.

use crate::sql::migrate::Migration;

/// The table that records applied steps (`readable_from`: see [`Migration::readable_from`]; added to
/// tables made before it, where older steps have none).
pub(super) const MIGRATIONS_TABLE: &str = "
CREATE TABLE IF NOT EXISTS weft_migrations (
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    readable_from BIGINT,
    PRIMARY KEY (component, version)
);
ALTER TABLE weft_migrations ADD COLUMN IF NOT EXISTS readable_from BIGINT";

/// Steps of the checkpointer's tables.
pub(super) const CHECKPOINT: &[Migration] = &[
    Migration {
        version: 1,
        readable_from: 0,
        name: "checkpoints, blobs per channel version (with delta bases), pending writes",
        sql: r#"
CREATE TABLE checkpoints (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    thread_key UUID NOT NULL GENERATED ALWAYS AS (md5(thread_id)::uuid) STORED,
    ns_key UUID NOT NULL GENERATED ALWAYS AS (md5(checkpoint_ns)::uuid) STORED,
    parent_checkpoint_id TEXT COLLATE "C",
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_key, ns_key, checkpoint_id)
);
CREATE INDEX checkpoints_by_id ON checkpoints (checkpoint_id);
CREATE TABLE checkpoint_blobs (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    thread_key UUID NOT NULL GENERATED ALWAYS AS (md5(thread_id)::uuid) STORED,
    ns_key UUID NOT NULL GENERATED ALWAYS AS (md5(checkpoint_ns)::uuid) STORED,
    channel TEXT COLLATE "C" NOT NULL,
    version TEXT COLLATE "C" NOT NULL,
    base_version TEXT COLLATE "C",
    blob BYTEA,
    PRIMARY KEY (thread_key, ns_key, channel, version)
);
CREATE TABLE checkpoint_writes (
    thread_id TEXT COLLATE "C" NOT NULL,
    checkpoint_ns TEXT COLLATE "C" NOT NULL DEFAULT '',
    thread_key UUID NOT NULL GENERATED ALWAYS AS (md5(thread_id)::uuid) STORED,
    ns_key UUID NOT NULL GENERATED ALWAYS AS (md5(checkpoint_ns)::uuid) STORED,
    checkpoint_id TEXT COLLATE "C" NOT NULL,
    task_id TEXT COLLATE "C" NOT NULL,
    idx BIGINT NOT NULL,
    task_path TEXT COLLATE "C" NOT NULL DEFAULT '',
    channel TEXT COLLATE "C" NOT NULL,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_key, ns_key, checkpoint_id, task_id, idx)
);"#,
    },
    Migration {
        version: 2,
        readable_from: 1,
        name: "weft_checkpoint_heads: lock threads and namespaces, then read their heads",
        // VOLATILE: each query of the function takes a new snapshot, so the heads read after the locks are
        // granted include every save committed before (the calling statement's own snapshot is older).
        sql: r#"
CREATE OR REPLACE FUNCTION weft_checkpoint_heads(threads TEXT[], namespaces TEXT[]) RETURNS TEXT[]
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    i INTEGER;
    heads TEXT[];
BEGIN
    FOR i IN 1 .. coalesce(array_length(threads, 1), 0) LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended(threads[i] || chr(31) || namespaces[i], 0));
    END LOOP;
    SELECT coalesce(array_agg(h.head ORDER BY k.i), '{}') INTO heads
    FROM unnest(threads, namespaces) WITH ORDINALITY AS k(t, n, i)
    LEFT JOIN LATERAL (SELECT max(c.checkpoint_id) AS head FROM checkpoints c
        WHERE c.thread_key = md5(k.t)::uuid AND c.ns_key = md5(k.n)::uuid AND c.thread_id = k.t
        AND c.checkpoint_ns = k.n) h ON true;
    RETURN heads;
END
$fn$;"#,
    },
    Migration {
        version: 3,
        readable_from: 2,
        name: "weft_checkpoint_heads: generic plans (no planning per call)",
        // Its queries take parameters, so PostgreSQL would plan them again at every call (custom plans):
        // most of a save's time on the server. The generic plans are the same index lookups.
        sql: "ALTER FUNCTION weft_checkpoint_heads(TEXT[], TEXT[]) SET plan_cache_mode = force_generic_plan",
    },
    Migration {
        version: 4,
        readable_from: 3,
        name: "weft_checkpoint_blobs: a checkpoint's blobs looked up by key, without JIT",
        // Each wanted channel version, then each delta's base, is one lookup by the whole primary key (a
        // `LIMIT 1` subquery is always planned as one), so a read costs what the checkpoint needs, not
        // what the thread has stored (a join let PostgreSQL hash every blob of the thread). In a function
        // of its own because the recursive lookups' cost estimate (PostgreSQL guesses 100 channels and 10
        // levels of deltas) passes `jit_above_cost` and a read would then spend 50 to 90 ms compiling:
        // `SET jit = off` applies to the function's query alone, and the calling query's estimate stays
        // small. `seen` stops a chain that would run in a circle (the caller reports it). STABLE: it
        // reads in the calling statement's snapshot.
        sql: r#"
CREATE OR REPLACE FUNCTION weft_checkpoint_blobs(at_thread_key UUID, at_ns_key UUID, at_thread TEXT,
    at_ns TEXT, wanted JSONB)
RETURNS TABLE (channel_list TEXT[], version_list TEXT[], base_list TEXT[], blob_list BYTEA[])
LANGUAGE plpgsql STABLE ROWS 1 SET jit = off AS $fn$
BEGIN
    RETURN QUERY WITH RECURSIVE chain(channel, version, base_version, blob, seen) AS (
        SELECT b.channel, b.version, b.base_version, b.blob, ARRAY[b.version]
        FROM jsonb_each_text(CASE WHEN jsonb_typeof(wanted) = 'object' THEN wanted ELSE '{}'::jsonb END) v
        CROSS JOIN LATERAL (SELECT bl.channel, bl.version, bl.base_version, bl.blob FROM checkpoint_blobs bl
            WHERE bl.thread_key = at_thread_key AND bl.ns_key = at_ns_key AND bl.thread_id = at_thread
            AND bl.checkpoint_ns = at_ns AND bl.channel = v.key COLLATE "C"
            AND bl.version = v.value COLLATE "C" LIMIT 1) b
        UNION ALL
        SELECT b.channel, b.version, b.base_version, b.blob, chain.seen || b.version
        FROM chain CROSS JOIN LATERAL (SELECT bl.channel, bl.version, bl.base_version, bl.blob
            FROM checkpoint_blobs bl
            WHERE bl.thread_key = at_thread_key AND bl.ns_key = at_ns_key AND bl.thread_id = at_thread
            AND bl.checkpoint_ns = at_ns AND bl.channel = chain.channel AND bl.version = chain.base_version
            LIMIT 1) b
        WHERE NOT chain.base_version = ANY (chain.seen)
    )
    SELECT array_agg(chain.channel), array_agg(chain.version), array_agg(chain.base_version),
        array_agg(chain.blob)
    FROM chain;
END
$fn$"#,
    },
    Migration {
        version: 5,
        readable_from: 4,
        name: "weft_checkpoint_batch: a batch's saves planned once per connection",
        // The batch was one statement sent by the saver, which PostgreSQL planned again at every call: a
        // plan made for the parameters' array lengths always looks cheaper than the generic one, so the
        // plan cache never kept one, and planning cost about a fifth of the statement. In a function with
        // `force_generic_plan` it is planned once per connection. The plan does not depend on the batch's
        // size: each base is one lookup by the whole primary key (`LIMIT 1`, as in
        // `weft_checkpoint_blobs`), and the rows are inserted as given. VOLATILE, as the statement was:
        // `weft_checkpoint_heads` reads the heads with a snapshot taken after its locks. The blobs' read
        // gets the same setting (its lookups are by key).
        sql: r#"
CREATE OR REPLACE FUNCTION weft_checkpoint_batch(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], TEXT[], TEXT[], TEXT[], BYTEA[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], BIGINT[], TEXT[], BYTEA[], TEXT[], TEXT[], BOOLEAN[], TEXT[])
RETURNS TABLE (bases_ok BOOLEAN, heads_ok BOOLEAN, stored BIGINT, found_heads TEXT[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
WITH bases AS (
    SELECT count(*) = cardinality($16::text[]) AS ok
    FROM unnest($13::text[], $14::text[], $15::text[], $16::text[]) AS d(thread, ns, channel, version)
    CROSS JOIN LATERAL (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_key = md5(d.thread)::uuid
        AND b.ns_key = md5(d.ns)::uuid AND b.thread_id = d.thread AND b.checkpoint_ns = d.ns
        AND b.channel = d.channel AND b.version = d.version LIMIT 1) b
),
found AS MATERIALIZED (
    SELECT CASE WHEN cardinality($25::text[]) = 0 THEN '{}'::text[]
        ELSE weft_checkpoint_heads($25::text[], $26::text[]) END AS heads
),
heads AS MATERIALIZED (
    SELECT g.i, CASE WHEN g.exact THEN f.heads[g.i] IS NOT DISTINCT FROM g.want
        ELSE f.heads[g.i] IS NULL OR f.heads[g.i] < g.want END AS ok, f.heads[g.i] AS head
    FROM unnest($25::text[], $26::text[], $27::bool[], $28::text[]) WITH ORDINALITY AS g(thread, ns, exact, want, i),
        found f
),
ok AS (
    SELECT (SELECT ok FROM bases) AND (SELECT coalesce(bool_and(ok), true) FROM heads) AS ok
),
cp AS (
    INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
    SELECT c.thread, c.ns, c.id, c.parent, c.body::jsonb, c.meta::jsonb
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
        AS c(thread, ns, id, parent, body, meta), ok
    WHERE ok.ok
    ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
        metadata = excluded.metadata
    WHERE checkpoints.thread_id = excluded.thread_id AND checkpoints.checkpoint_ns = excluded.checkpoint_ns
    RETURNING 1
),
blobs AS (
    INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
    SELECT v.thread, v.ns, v.channel, v.version, v.base, v.blob
    FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[])
        AS v(thread, ns, channel, version, base, blob), ok
    WHERE ok.ok
    ON CONFLICT DO NOTHING
),
writes AS (
    INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, blob)
    SELECT w.thread, w.ns, w.checkpoint, w.task, w.path, w.idx, w.channel, w.blob
    FROM unnest($17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::bigint[], $23::text[],
        $24::bytea[]) AS w(thread, ns, checkpoint, task, path, idx, channel, blob), ok
    WHERE ok.ok
    ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
        task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
    WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
        AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns
)
SELECT (SELECT ok FROM bases), (SELECT coalesce(bool_and(ok), true) FROM heads), (SELECT count(*) FROM cp),
    coalesce((SELECT array_agg(head ORDER BY i) FROM heads), '{}');
END
$fn$;
ALTER FUNCTION weft_checkpoint_blobs(UUID, UUID, TEXT, TEXT, JSONB) SET plan_cache_mode = force_generic_plan;"#,
    },
    Migration {
        version: 6,
        readable_from: 5,
        name: "weft_checkpoint_batch: only the statements a batch needs; weft_checkpoint_tuple: one checkpoint \
               read with a plan per connection",
        // The batch as separate statements, each run only when it has something to do: as one statement,
        // each of its three inserts was started (its table and indexes opened) even with no rows, a third
        // of a full batch's time. Same arguments, checks and result as version 5; nothing is written
        // unless every base is stored and every head is as assumed.
        //
        // A checkpoint read by thread, namespace and id (null: the latest) was one statement of the
        // saver with optional filters, planned at every call (a plan for its parameters' values always
        // looks cheaper than the generic one, which must keep every filter): in a function, each case is
        // its own query with a generic plan, planned once per connection, also without prepared
        // statements (behind a transaction-mode pooler). STABLE: it reads in the caller's snapshot.
        sql: r#"
CREATE OR REPLACE FUNCTION weft_checkpoint_batch(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], TEXT[], TEXT[], TEXT[], BYTEA[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], BIGINT[], TEXT[], BYTEA[], TEXT[], TEXT[], BOOLEAN[], TEXT[])
RETURNS TABLE (bases_ok BOOLEAN, heads_ok BOOLEAN, stored BIGINT, found_heads TEXT[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    heads_now TEXT[];
BEGIN
    bases_ok := true;
    heads_ok := true;
    stored := 0;
    found_heads := '{}';
    IF cardinality($16) > 0 THEN
        SELECT count(*) = cardinality($16) INTO bases_ok
        FROM unnest($13, $14, $15, $16) AS d(thread, ns, channel, version)
        CROSS JOIN LATERAL (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_key = md5(d.thread)::uuid
            AND b.ns_key = md5(d.ns)::uuid AND b.thread_id = d.thread AND b.checkpoint_ns = d.ns
            AND b.channel = d.channel AND b.version = d.version LIMIT 1) b;
    END IF;
    IF cardinality($25) > 0 THEN
        heads_now := weft_checkpoint_heads($25, $26);
        SELECT coalesce(bool_and(CASE WHEN g.exact THEN heads_now[g.i] IS NOT DISTINCT FROM g.want
                ELSE heads_now[g.i] IS NULL OR heads_now[g.i] < g.want END), true),
            coalesce(array_agg(heads_now[g.i] ORDER BY g.i), '{}')
        INTO heads_ok, found_heads
        FROM unnest($25, $27, $28) WITH ORDINALITY AS g(thread, exact, want, i);
    END IF;
    IF bases_ok AND heads_ok THEN
        IF cardinality($1) > 0 THEN
            INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,
                metadata)
            SELECT c.thread, c.ns, c.id, c.parent, c.body::jsonb, c.meta::jsonb
            FROM unnest($1, $2, $3, $4, $5, $6) AS c(thread, ns, id, parent, body, meta)
            ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
                parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
                metadata = excluded.metadata
            WHERE checkpoints.thread_id = excluded.thread_id
                AND checkpoints.checkpoint_ns = excluded.checkpoint_ns;
            GET DIAGNOSTICS stored = ROW_COUNT;
        END IF;
        IF cardinality($7) > 0 THEN
            INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
            SELECT v.thread, v.ns, v.channel, v.version, v.base, v.blob
            FROM unnest($7, $8, $9, $10, $11, $12) AS v(thread, ns, channel, version, base, blob)
            ON CONFLICT DO NOTHING;
        END IF;
        IF cardinality($17) > 0 THEN
            INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
                channel, blob)
            SELECT w.thread, w.ns, w.checkpoint, w.task, w.path, w.idx, w.channel, w.blob
            FROM unnest($17, $18, $19, $20, $21, $22, $23, $24)
                AS w(thread, ns, checkpoint, task, path, idx, channel, blob)
            ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
                task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
            WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
                AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns;
        END IF;
    END IF;
    RETURN NEXT;
END
$fn$;
CREATE OR REPLACE FUNCTION weft_checkpoint_tuple(at_thread TEXT, at_ns TEXT, at_id TEXT)
RETURNS TABLE (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT, parent_checkpoint_id TEXT,
    checkpoint TEXT, metadata TEXT, channel_list TEXT[], version_list TEXT[], base_list TEXT[],
    blob_list BYTEA[], task_ids TEXT[], task_paths TEXT[], idxs BIGINT[], channels TEXT[], blobs BYTEA[])
LANGUAGE plpgsql STABLE ROWS 1 SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    picked checkpoints;
BEGIN
    IF at_id IS NULL THEN
        SELECT * INTO picked FROM checkpoints c
        WHERE c.thread_key = md5(at_thread)::uuid AND c.thread_id = at_thread
            AND c.ns_key = md5(at_ns)::uuid AND c.checkpoint_ns = at_ns
        ORDER BY c.checkpoint_id DESC LIMIT 1;
    ELSE
        SELECT * INTO picked FROM checkpoints c
        WHERE c.thread_key = md5(at_thread)::uuid AND c.thread_id = at_thread
            AND c.ns_key = md5(at_ns)::uuid AND c.checkpoint_ns = at_ns AND c.checkpoint_id = at_id;
    END IF;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT picked.thread_id, picked.checkpoint_ns, picked.checkpoint_id,
        picked.parent_checkpoint_id, picked.checkpoint::text, picked.metadata::text, b.channel_list,
        b.version_list, b.base_list, b.blob_list, w.task_ids, w.task_paths, w.idxs, w.channels, w.blobs
    FROM weft_checkpoint_blobs(picked.thread_key, picked.ns_key, picked.thread_id, picked.checkpoint_ns,
        picked.checkpoint -> 'channel_versions') b
    LEFT JOIN LATERAL (
        SELECT array_agg(cw.task_id) AS task_ids, array_agg(cw.task_path) AS task_paths,
            array_agg(cw.idx) AS idxs, array_agg(cw.channel) AS channels, array_agg(cw.blob) AS blobs
        FROM checkpoint_writes cw
        WHERE cw.thread_key = picked.thread_key AND cw.ns_key = picked.ns_key
            AND cw.thread_id = picked.thread_id AND cw.checkpoint_ns = picked.checkpoint_ns
            AND cw.checkpoint_id = picked.checkpoint_id
    ) w ON true;
END
$fn$;"#,
    },
    Migration {
        version: 7,
        readable_from: 6,
        name: "a thread's head and history read from its newest index entry, however long the thread and \
               whatever the statistics",
        // The head of a thread was `max(checkpoint_id)` over the thread's rows, and the latest checkpoint
        // `ORDER BY checkpoint_id DESC LIMIT 1`; with a generic plan PostgreSQL estimates the rows of a
        // thread from the table's average (about 10 where threads have 10 checkpoints), and for that few
        // it reads them all through a bitmap scan and sorts or aggregates them: on a thread of 3,000
        // checkpoints, 3,000 index entries and heap rows at every save and every read of its head. With
        // bitmap scans and sorts off in these functions (a setting that makes such plans dear, not
        // impossible), the plan left walks the primary key backwards and stops at the first row of the
        // thread; the heads are read with `ORDER BY ... LIMIT 1` (for `max` the planner need not choose
        // that walk). The batch reads its heads inline (the locks, then the read and the check in one
        // statement) instead of calling `weft_checkpoint_heads`, which nothing calls any more; it is
        // kept, fixed the same way, for a call of the previous batch function in flight while this step
        // is applied (builds that called it themselves, before version 5, are refused since 6). The
        // heads are compared in byte order (`COLLATE "C"`, as the saver's own checks compare ids); a
        // `TEXT[]` variable compared in the database's collation before, the same order for the ids
        // weft makes. Otherwise the same signatures and results.
        //
        // A thread's history (`list` of one thread: newest first, an optional id, `before`, metadata
        // filter and limit) was a statement of the saver's, whose cached plan had the same fault: every
        // checkpoint of a long thread read and sorted for a page of ten. `weft_checkpoint_list` picks
        // the page by walking the primary key backwards from the newest checkpoint (or from `before`,
        // as an index bound: each case is a query of its own), then reads each picked checkpoint by its
        // key (a `LIMIT 1` lookup, never a join PostgreSQL could plan as a scan of the thread) with its
        // blobs and writes, as `weft_checkpoint_tuple` does.
        sql: r#"
CREATE OR REPLACE FUNCTION weft_checkpoint_batch(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], TEXT[], TEXT[], TEXT[], BYTEA[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], BIGINT[], TEXT[], BYTEA[], TEXT[], TEXT[], BOOLEAN[], TEXT[])
RETURNS TABLE (bases_ok BOOLEAN, heads_ok BOOLEAN, stored BIGINT, found_heads TEXT[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off SET enable_bitmapscan = off
    SET enable_sort = off AS $fn$
#variable_conflict use_column
BEGIN
    bases_ok := true;
    heads_ok := true;
    stored := 0;
    found_heads := '{}';
    IF cardinality($16) > 0 THEN
        SELECT count(*) = cardinality($16) INTO bases_ok
        FROM unnest($13, $14, $15, $16) AS d(thread, ns, channel, version)
        CROSS JOIN LATERAL (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_key = md5(d.thread)::uuid
            AND b.ns_key = md5(d.ns)::uuid AND b.thread_id = d.thread AND b.checkpoint_ns = d.ns
            AND b.channel = d.channel AND b.version = d.version LIMIT 1) b;
    END IF;
    IF cardinality($25) > 0 THEN
        -- The locks in the order given (sorted by the caller), then the heads, read by a statement of
        -- its own: its snapshot is taken after the locks are granted.
        FOR i IN 1 .. cardinality($25) LOOP
            PERFORM pg_advisory_xact_lock(hashtextextended($25[i] || chr(31) || $26[i], 0));
        END LOOP;
        SELECT coalesce(bool_and(CASE WHEN g.exact THEN h.head IS NOT DISTINCT FROM g.want
                ELSE h.head IS NULL OR h.head < g.want COLLATE "C" END), true),
            coalesce(array_agg(h.head ORDER BY g.i), '{}')
        INTO heads_ok, found_heads
        FROM unnest($25, $26, $27, $28) WITH ORDINALITY AS g(thread, ns, exact, want, i)
        LEFT JOIN LATERAL (SELECT c.checkpoint_id AS head FROM checkpoints c
            WHERE c.thread_key = md5(g.thread)::uuid AND c.ns_key = md5(g.ns)::uuid
            AND c.thread_id = g.thread AND c.checkpoint_ns = g.ns
            ORDER BY c.checkpoint_id DESC LIMIT 1) h ON true;
    END IF;
    IF bases_ok AND heads_ok THEN
        IF cardinality($1) > 0 THEN
            INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,
                metadata)
            SELECT c.thread, c.ns, c.id, c.parent, c.body::jsonb, c.meta::jsonb
            FROM unnest($1, $2, $3, $4, $5, $6) AS c(thread, ns, id, parent, body, meta)
            ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
                parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
                metadata = excluded.metadata
            WHERE checkpoints.thread_id = excluded.thread_id
                AND checkpoints.checkpoint_ns = excluded.checkpoint_ns;
            GET DIAGNOSTICS stored = ROW_COUNT;
        END IF;
        IF cardinality($7) > 0 THEN
            INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
            SELECT v.thread, v.ns, v.channel, v.version, v.base, v.blob
            FROM unnest($7, $8, $9, $10, $11, $12) AS v(thread, ns, channel, version, base, blob)
            ON CONFLICT DO NOTHING;
        END IF;
        IF cardinality($17) > 0 THEN
            INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
                channel, blob)
            SELECT w.thread, w.ns, w.checkpoint, w.task, w.path, w.idx, w.channel, w.blob
            FROM unnest($17, $18, $19, $20, $21, $22, $23, $24)
                AS w(thread, ns, checkpoint, task, path, idx, channel, blob)
            ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
                task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
            WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
                AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns;
        END IF;
    END IF;
    RETURN NEXT;
END
$fn$;
CREATE OR REPLACE FUNCTION weft_checkpoint_heads(threads TEXT[], namespaces TEXT[]) RETURNS TEXT[]
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off SET enable_bitmapscan = off
    SET enable_sort = off AS $fn$
DECLARE
    i INTEGER;
    heads TEXT[];
BEGIN
    FOR i IN 1 .. coalesce(array_length(threads, 1), 0) LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended(threads[i] || chr(31) || namespaces[i], 0));
    END LOOP;
    SELECT coalesce(array_agg(h.head ORDER BY k.i), '{}') INTO heads
    FROM unnest(threads, namespaces) WITH ORDINALITY AS k(t, n, i)
    LEFT JOIN LATERAL (SELECT c.checkpoint_id AS head FROM checkpoints c
        WHERE c.thread_key = md5(k.t)::uuid AND c.ns_key = md5(k.n)::uuid AND c.thread_id = k.t
        AND c.checkpoint_ns = k.n ORDER BY c.checkpoint_id DESC LIMIT 1) h ON true;
    RETURN heads;
END
$fn$;
ALTER FUNCTION weft_checkpoint_tuple(TEXT, TEXT, TEXT) SET enable_bitmapscan = off;
ALTER FUNCTION weft_checkpoint_tuple(TEXT, TEXT, TEXT) SET enable_sort = off;
CREATE OR REPLACE FUNCTION weft_checkpoint_list(at_thread TEXT, at_ns TEXT, at_id TEXT, at_before TEXT,
    at_filter JSONB, at_limit BIGINT)
RETURNS TABLE (thread_id TEXT, checkpoint_ns TEXT, checkpoint_id TEXT, parent_checkpoint_id TEXT,
    checkpoint TEXT, metadata TEXT, channel_list TEXT[], version_list TEXT[], base_list TEXT[],
    blob_list BYTEA[], task_ids TEXT[], task_paths TEXT[], idxs BIGINT[], channels TEXT[], blobs BYTEA[])
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off SET enable_bitmapscan = off
    SET enable_sort = off AS $fn$
#variable_conflict use_column
DECLARE
    picked TEXT[];
BEGIN
    -- By id: one checkpoint at most (the caller never asks for a limit of 0).
    IF at_id IS NOT NULL THEN
        SELECT array_agg(c.checkpoint_id) INTO picked FROM checkpoints c
        WHERE c.thread_key = md5(at_thread)::uuid AND c.thread_id = at_thread
            AND c.ns_key = md5(at_ns)::uuid AND c.checkpoint_ns = at_ns AND c.checkpoint_id = at_id
            AND (at_before IS NULL OR c.checkpoint_id < at_before)
            AND (at_filter IS NULL OR c.metadata @> at_filter);
    ELSIF at_before IS NOT NULL THEN
        SELECT array_agg(p.id ORDER BY p.id DESC) INTO picked FROM (SELECT c.checkpoint_id AS id FROM checkpoints c
            WHERE c.thread_key = md5(at_thread)::uuid AND c.thread_id = at_thread
                AND c.ns_key = md5(at_ns)::uuid AND c.checkpoint_ns = at_ns AND c.checkpoint_id < at_before
                AND (at_filter IS NULL OR c.metadata @> at_filter)
            ORDER BY c.checkpoint_id DESC LIMIT at_limit) p;
    ELSE
        SELECT array_agg(p.id ORDER BY p.id DESC) INTO picked FROM (SELECT c.checkpoint_id AS id FROM checkpoints c
            WHERE c.thread_key = md5(at_thread)::uuid AND c.thread_id = at_thread
                AND c.ns_key = md5(at_ns)::uuid AND c.checkpoint_ns = at_ns
                AND (at_filter IS NULL OR c.metadata @> at_filter)
            ORDER BY c.checkpoint_id DESC LIMIT at_limit) p;
    END IF;
    RETURN QUERY SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id,
        c.checkpoint::text, c.metadata::text, b.channel_list, b.version_list, b.base_list, b.blob_list,
        w.task_ids, w.task_paths, w.idxs, w.channels, w.blobs
    FROM unnest(picked) WITH ORDINALITY AS p(id, n)
    CROSS JOIN LATERAL (SELECT * FROM checkpoints c WHERE c.thread_key = md5(at_thread)::uuid
        AND c.ns_key = md5(at_ns)::uuid AND c.checkpoint_id = p.id AND c.thread_id = at_thread
        AND c.checkpoint_ns = at_ns LIMIT 1) c
    CROSS JOIN LATERAL weft_checkpoint_blobs(c.thread_key, c.ns_key, c.thread_id, c.checkpoint_ns,
        c.checkpoint -> 'channel_versions') b
    LEFT JOIN LATERAL (
        SELECT array_agg(cw.task_id) AS task_ids, array_agg(cw.task_path) AS task_paths,
            array_agg(cw.idx) AS idxs, array_agg(cw.channel) AS channels, array_agg(cw.blob) AS blobs
        FROM checkpoint_writes cw
        WHERE cw.thread_key = c.thread_key AND cw.ns_key = c.ns_key AND cw.thread_id = c.thread_id
            AND cw.checkpoint_ns = c.checkpoint_ns AND cw.checkpoint_id = c.checkpoint_id
    ) w ON true
    ORDER BY p.n;
END
$fn$;"#,
    },
    Migration {
        version: 8,
        readable_from: 8,
        name: "scalar channel values kept in the checkpoint's record, not as blob rows",
        // No table changes: from this step on, a checkpoint's `channel_values` holds the values of its
        // channels that are small scalars (`is_inline_scalar`), and those versions get no blob row.
        // Builds before it would look for those rows and fail to read the checkpoint, so they refuse the
        // database instead.
        sql: "COMMENT ON COLUMN checkpoints.checkpoint IS \
              'the checkpoint as JSON; channel_values holds its scalar values, blob rows the others'",
    },
];

/// Steps of the store's tables.
pub(super) const STORE: &[Migration] = &[Migration {
    version: 1,
    readable_from: 0,
    name: "store items (namespace text, TTL, update order) and vectors",
    sql: r#"
CREATE SEQUENCE store_seq;
CREATE TABLE store_items (
    prefix TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    prefix_key UUID NOT NULL GENERATED ALWAYS AS (md5(prefix)::uuid) STORED,
    key_key UUID NOT NULL GENERATED ALWAYS AS (md5(key)::uuid) STORED,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    seq BIGINT NOT NULL DEFAULT nextval('store_seq'),
    expires_at BIGINT,
    ttl_micros BIGINT,
    PRIMARY KEY (prefix_key, key_key)
);
CREATE INDEX store_items_by_prefix ON store_items (left(prefix, 256));
CREATE INDEX store_items_by_seq ON store_items (seq);
CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE store_vectors (
    prefix_key UUID NOT NULL,
    key_key UUID NOT NULL,
    idx BIGINT NOT NULL,
    embedding BYTEA NOT NULL,
    PRIMARY KEY (prefix_key, key_key, idx),
    FOREIGN KEY (prefix_key, key_key) REFERENCES store_items (prefix_key, key_key) ON DELETE CASCADE
);"#,
}];
