-- The batch of loop1000_postgres (two checkpoints, four channel values, four writes, one head), as the
-- saver sent it (parameters copied from PostgreSQL's log), called by pgbench through a wrapper that
-- gives each call new checkpoint ids: run with the saver's schema (migrations 1-7) in schema pb, then
--   PGOPTIONS='-c search_path=pb' pgbench -n -M prepared -t 6000 -f call.sql   (call.sql: SELECT pb.call_weft_checkpoint_batch();)
-- and variants made from it: pb.call_noblobs (empty value arrays), pb.v_one, pb.v_plain and pb.v_two (each
-- called through a copy of the wrapper naming it: pb.call_v_one etc.).

CREATE OR REPLACE FUNCTION pb.call_weft_checkpoint_batch() RETURNS void LANGUAGE plpgsql AS $q$
DECLARE a text := gen_random_uuid()::text; b text := gen_random_uuid()::text; r record;
BEGIN
 SELECT * INTO r FROM pb.weft_checkpoint_batch('{bench-thread-1,bench-thread-1}', '{"",""}', ARRAY['01a' || a, '01a' || b], ARRAY['01a23131-d0a5-7dec-a9c2-30b7e551474a', '01a' || a], '{"{\"v\":1,\"id\":\"01a23131-d0a6-726c-8094-06efee5b6db8\",\"ts\":\"2026-12-01T10:41:17.990125+00:00\",\"channel_values\":{},\"channel_versions\":{\"__start__\":\"00000000000000000000000000000002.3537742723665555\",\"branch:to:inc\":\"00000000000000000000000000000103.1506774034990219\",\"count\":\"00000000000000000000000000000103.1506774034990219\"},\"versions_seen\":{\"__input__\":{},\"__start__\":{\"__start__\":\"00000000000000000000000000000001.2986873481743441\"},\"inc\":{\"branch:to:inc\":\"00000000000000000000000000000102.0006374658359699\"}},\"updated_channels\":[\"branch:to:inc\",\"count\"]}","{\"v\":1,\"id\":\"01a23131-d0a6-726c-8094-06efee5b6db9\",\"ts\":\"2026-12-01T10:41:17.990131+00:00\",\"channel_values\":{},\"channel_versions\":{\"__start__\":\"00000000000000000000000000000002.3537742723665555\",\"branch:to:inc\":\"00000000000000000000000000000104.4317153577096131\",\"count\":\"00000000000000000000000000000104.4317153577096131\"},\"versions_seen\":{\"__input__\":{},\"__start__\":{\"__start__\":\"00000000000000000000000000000001.2986873481743441\"},\"inc\":{\"branch:to:inc\":\"00000000000000000000000000000103.1506774034990219\"}},\"updated_channels\":[\"branch:to:inc\",\"count\"]}"}', '{"{\"source\":\"loop\",\"step\":101,\"parents\":{}}","{\"source\":\"loop\",\"step\":102,\"parents\":{}}"}', '{bench-thread-1,bench-thread-1,bench-thread-1,bench-thread-1}', '{"","","",""}', '{branch:to:inc,count,branch:to:inc,count}', ARRAY['0a' || a, '0a' || a, '0a' || b, '0a' || b], '{NULL,NULL,NULL,NULL}', '{"\\x6a736f6e3a313a6e756c6c","\\x6a736f6e3a313a313031","\\x6a736f6e3a313a6e756c6c","\\x6a736f6e3a313a313032"}', '{}', '{}', '{}', '{}', '{bench-thread-1,bench-thread-1,bench-thread-1,bench-thread-1}', '{"","","",""}', ARRAY['01a' || a, '01a' || a, '01a' || b, '01a' || b], '{881e1e94-d57c-f866-51a1-1f9c4e3ae554,881e1e94-d57c-f866-51a1-1f9c4e3ae554,0780fb61-99f9-fb7b-fe73-ec05ed8112af,0780fb61-99f9-fb7b-fe73-ec05ed8112af}', '{"~__pregel_pull, inc","~__pregel_pull, inc","~__pregel_pull, inc","~__pregel_pull, inc"}', '{0,1,0,1}', '{count,branch:to:inc,count,branch:to:inc}', '{"\\x6a736f6e3a313a313031","\\x6a736f6e3a313a6e756c6c","\\x6a736f6e3a313a313032","\\x6a736f6e3a313a6e756c6c"}', '{bench-thread-1}', '{""}', '{f}', '{zzzz}');
END $q$;
-- Without the four channel-value rows (the same function, empty value arrays):
CREATE OR REPLACE FUNCTION pb.call_noblobs() RETURNS void LANGUAGE plpgsql AS $q$
DECLARE a text := gen_random_uuid()::text; b text := gen_random_uuid()::text; r record;
BEGIN
 SELECT * INTO r FROM pb.weft_checkpoint_batch('{bench-thread-1,bench-thread-1}', '{"",""}', ARRAY['01a' || a, '01a' || b], ARRAY['01a23131-d0a5-7dec-a9c2-30b7e551474a', '01a' || a], '{"{\"v\":1,\"id\":\"01a23131-d0a6-726c-8094-06efee5b6db8\",\"ts\":\"2026-12-01T10:41:17.990125+00:00\",\"channel_values\":{},\"channel_versions\":{\"__start__\":\"00000000000000000000000000000002.3537742723665555\",\"branch:to:inc\":\"00000000000000000000000000000103.1506774034990219\",\"count\":\"00000000000000000000000000000103.1506774034990219\"},\"versions_seen\":{\"__input__\":{},\"__start__\":{\"__start__\":\"00000000000000000000000000000001.2986873481743441\"},\"inc\":{\"branch:to:inc\":\"00000000000000000000000000000102.0006374658359699\"}},\"updated_channels\":[\"branch:to:inc\",\"count\"]}","{\"v\":1,\"id\":\"01a23131-d0a6-726c-8094-06efee5b6db9\",\"ts\":\"2026-12-01T10:41:17.990131+00:00\",\"channel_values\":{},\"channel_versions\":{\"__start__\":\"00000000000000000000000000000002.3537742723665555\",\"branch:to:inc\":\"00000000000000000000000000000104.4317153577096131\",\"count\":\"00000000000000000000000000000104.4317153577096131\"},\"versions_seen\":{\"__input__\":{},\"__start__\":{\"__start__\":\"00000000000000000000000000000001.2986873481743441\"},\"inc\":{\"branch:to:inc\":\"00000000000000000000000000000103.1506774034990219\"}},\"updated_channels\":[\"branch:to:inc\",\"count\"]}"}', '{"{\"source\":\"loop\",\"step\":101,\"parents\":{}}","{\"source\":\"loop\",\"step\":102,\"parents\":{}}"}', '{}','{}','{}','{}','{}','{}', '{}', '{}', '{}', '{}', '{bench-thread-1,bench-thread-1,bench-thread-1,bench-thread-1}', '{"","","",""}', ARRAY['01a' || a, '01a' || a, '01a' || b, '01a' || b], '{881e1e94-d57c-f866-51a1-1f9c4e3ae554,881e1e94-d57c-f866-51a1-1f9c4e3ae554,0780fb61-99f9-fb7b-fe73-ec05ed8112af,0780fb61-99f9-fb7b-fe73-ec05ed8112af}', '{"~__pregel_pull, inc","~__pregel_pull, inc","~__pregel_pull, inc","~__pregel_pull, inc"}', '{0,1,0,1}', '{count,branch:to:inc,count,branch:to:inc}', '{"\\x6a736f6e3a313a313031","\\x6a736f6e3a313a6e756c6c","\\x6a736f6e3a313a313032","\\x6a736f6e3a313a6e756c6c"}', '{bench-thread-1}', '{""}', '{f}', '{zzzz}');
END $q$;
-- The three inserts as one statement (data-modifying CTEs):
CREATE OR REPLACE FUNCTION pb.v_one(text[], text[], text[], text[], text[], text[], text[], text[], text[], text[], text[], bytea[], text[], text[], text[], text[], text[], text[], text[], text[], text[], bigint[], text[], bytea[], text[], text[], boolean[], text[])
 RETURNS TABLE(bases_ok boolean, heads_ok boolean, stored bigint, found_heads text[])
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
AS $function$
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
        WITH c AS (
            INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,
                metadata)
            SELECT c.thread, c.ns, c.id, c.parent, c.body::jsonb, c.meta::jsonb
            FROM unnest($1, $2, $3, $4, $5, $6) AS c(thread, ns, id, parent, body, meta)
            ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
                parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
                metadata = excluded.metadata
            WHERE checkpoints.thread_id = excluded.thread_id
                AND checkpoints.checkpoint_ns = excluded.checkpoint_ns
            RETURNING 1), b AS (
            INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
            SELECT v.thread, v.ns, v.channel, v.version, v.base, v.blob
            FROM unnest($7, $8, $9, $10, $11, $12) AS v(thread, ns, channel, version, base, blob)
            ON CONFLICT DO NOTHING), w AS (
            INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
                channel, blob)
            SELECT w.thread, w.ns, w.checkpoint, w.task, w.path, w.idx, w.channel, w.blob
            FROM unnest($17, $18, $19, $20, $21, $22, $23, $24)
                AS w(thread, ns, checkpoint, task, path, idx, channel, blob)
            ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
                task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
            WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
                AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns)
        SELECT count(*) INTO stored FROM c;
    END IF;
    RETURN NEXT;
END
$function$

;
-- The locks, then the bases and heads check and the three inserts in one statement:
CREATE OR REPLACE FUNCTION pb.v_two(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], TEXT[], TEXT[], TEXT[], BYTEA[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], TEXT[],
    TEXT[], BIGINT[], TEXT[], BYTEA[], TEXT[], TEXT[], BOOLEAN[], TEXT[])
RETURNS TABLE (bases_ok BOOLEAN, heads_ok BOOLEAN, stored BIGINT, found_heads TEXT[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET jit = off SET enable_bitmapscan = off
    SET enable_sort = off AS $fn$
#variable_conflict use_column
BEGIN
    IF cardinality($25) > 0 THEN
        PERFORM pg_advisory_xact_lock(hashtextextended(l.t || chr(31) || l.n, 0))
        FROM unnest($25, $26) WITH ORDINALITY AS l(t, n, i) ORDER BY l.i;
    END IF;
    WITH b AS (
        SELECT count(*) = cardinality($16) AS ok
        FROM unnest($13, $14, $15, $16) AS d(thread, ns, channel, version)
        CROSS JOIN LATERAL (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_key = md5(d.thread)::uuid
            AND b.ns_key = md5(d.ns)::uuid AND b.thread_id = d.thread AND b.checkpoint_ns = d.ns
            AND b.channel = d.channel AND b.version = d.version LIMIT 1) b
    ), h AS (
        SELECT coalesce(bool_and(CASE WHEN g.exact THEN h.head IS NOT DISTINCT FROM g.want
                ELSE h.head IS NULL OR h.head < g.want COLLATE "C" END), true) AS ok,
            coalesce(array_agg(h.head ORDER BY g.i), '{}') AS found
        FROM unnest($25, $26, $27, $28) WITH ORDINALITY AS g(thread, ns, exact, want, i)
        LEFT JOIN LATERAL (SELECT c.checkpoint_id AS head FROM checkpoints c
            WHERE c.thread_key = md5(g.thread)::uuid AND c.ns_key = md5(g.ns)::uuid
            AND c.thread_id = g.thread AND c.checkpoint_ns = g.ns
            ORDER BY c.checkpoint_id DESC LIMIT 1) h ON true
    ), go AS (SELECT b.ok AS bases, h.ok AS heads, h.found, b.ok AND h.ok AS ok FROM b, h),
    c AS (
        INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,
            metadata)
        SELECT c.thread, c.ns, c.id, c.parent, c.body::jsonb, c.meta::jsonb
        FROM unnest($1, $2, $3, $4, $5, $6) AS c(thread, ns, id, parent, body, meta)
        WHERE (SELECT ok FROM go)
        ON CONFLICT (thread_key, ns_key, checkpoint_id) DO UPDATE SET
            parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint = excluded.checkpoint,
            metadata = excluded.metadata
        WHERE checkpoints.thread_id = excluded.thread_id
            AND checkpoints.checkpoint_ns = excluded.checkpoint_ns
        RETURNING 1
    ), v AS (
        INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
        SELECT v.thread, v.ns, v.channel, v.version, v.base, v.blob
        FROM unnest($7, $8, $9, $10, $11, $12) AS v(thread, ns, channel, version, base, blob)
        WHERE (SELECT ok FROM go)
        ON CONFLICT DO NOTHING
    ), w AS (
        INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
            channel, blob)
        SELECT w.thread, w.ns, w.checkpoint, w.task, w.path, w.idx, w.channel, w.blob
        FROM unnest($17, $18, $19, $20, $21, $22, $23, $24)
            AS w(thread, ns, checkpoint, task, path, idx, channel, blob)
        WHERE (SELECT ok FROM go)
        ON CONFLICT (thread_key, ns_key, checkpoint_id, task_id, idx) DO UPDATE SET
            task_path = excluded.task_path, channel = excluded.channel, blob = excluded.blob
        WHERE excluded.idx < 0 AND checkpoint_writes.thread_id = excluded.thread_id
            AND checkpoint_writes.checkpoint_ns = excluded.checkpoint_ns
    )
    SELECT go.bases, go.heads, (SELECT count(*) FROM c), go.found INTO bases_ok, heads_ok, stored, found_heads
    FROM go;
    RETURN NEXT;
END
$fn$;

-- v_one without ON CONFLICT (not a valid design, a bound):
CREATE OR REPLACE FUNCTION pb.v_plain(text[], text[], text[], text[], text[], text[], text[], text[], text[], text[], text[], bytea[], text[], text[], text[], text[], text[], text[], text[], text[], text[], bigint[], text[], bytea[], text[], text[], boolean[], text[])
 RETURNS TABLE(bases_ok boolean, heads_ok boolean, stored bigint, found_heads text[])
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET jit TO 'off'
 SET enable_bitmapscan TO 'off'
 SET enable_sort TO 'off'
AS $function$
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
        WITH c AS (
            INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint,
                metadata)
            SELECT c.thread, c.ns, c.id, c.parent, c.body::jsonb, c.meta::jsonb
            FROM unnest($1, $2, $3, $4, $5, $6) AS c(thread, ns, id, parent, body, meta)
            RETURNING 1), b AS (
            INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, base_version, blob)
            SELECT v.thread, v.ns, v.channel, v.version, v.base, v.blob
            FROM unnest($7, $8, $9, $10, $11, $12) AS v(thread, ns, channel, version, base, blob)
            ), w AS (
            INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx,
                channel, blob)
            SELECT w.thread, w.ns, w.checkpoint, w.task, w.path, w.idx, w.channel, w.blob
            FROM unnest($17, $18, $19, $20, $21, $22, $23, $24)
                AS w(thread, ns, checkpoint, task, path, idx, channel, blob)
            )
        SELECT count(*) INTO stored FROM c;
    END IF;
    RETURN NEXT;
END
$function$

;
