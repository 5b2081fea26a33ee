-- rath_refresh_statistics() takes the statistics of the hot tables whose
-- size has doubled since Postgres last measured them (issue 25).
--
-- Postgres plans a table it has no statistics for by its size when the
-- plan is made, and a connection keeps a prepared statement's generic plan
-- until the statistics of a table it reads change. Under the row-level
-- security of rath_worker and rath_coordinator, the plans made on a new
-- store's first few pages join a version, a run or a step by a scan of the
-- whole table (the parameterized index scan the owner's plan takes is not
-- chosen); a store then grows by thousands of rows a second while every
-- version insert and step start scans all of versions, until autovacuum's
-- first ANALYZE, up to a minute later (autovacuum_naptime) and only once
-- 10% of the rows changed.
--
-- The run store calls this as it grows (internal/runs, statistics.go). A
-- table is analyzed when its pages have doubled since its last statistics
-- (from 8 pages on, so a store's first rows cost nothing), up to 16,384
-- pages (128 MiB with 8 KiB pages), past which autovacuum's own thresholds
-- serve: each table is analyzed at most about a dozen times in its life.
-- ANALYZE changes the statistics, and every connection plans the
-- statements that read the table anew at their next use. The function runs
-- as its owner (SECURITY DEFINER: ANALYZE needs the table's owner), so the
-- worker and coordinator roles may call it; lock_timeout keeps it from
-- waiting on autovacuum, which holds the same lock while it works on the
-- table: that table is skipped until the next call. It returns how many
-- tables it analyzed.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION rath_refresh_statistics() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '100ms' AS $$
DECLARE
    t regclass;
    pages bigint;
    measured integer;
    n integer := 0;
BEGIN
    FOREACH t IN ARRAY ARRAY['runs', 'steps', 'versions', 'chunks', 'lineage']::regclass[] LOOP
        pages := pg_relation_size(t) / current_setting('block_size')::bigint;
        SELECT relpages INTO measured FROM pg_class WHERE oid = t;
        IF pages >= 2 * GREATEST(measured, 4) AND pages <= 16384 THEN
            BEGIN
                EXECUTE format('ANALYZE %s', t);
                n := n + 1;
            EXCEPTION WHEN lock_not_available THEN
                NULL; -- autovacuum is at it
            END;
        END IF;
    END LOOP;
    RETURN n;
END;
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION rath_refresh_statistics() FROM PUBLIC;
-- +goose StatementBegin
DO $$
DECLARE
    r text;
BEGIN
    EXECUTE format('GRANT EXECUTE ON FUNCTION rath_refresh_statistics() TO %I', current_user);
    FOREACH r IN ARRAY ARRAY['rath_worker', 'rath_coordinator'] LOOP
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION rath_refresh_statistics() TO %I', r);
        END IF;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rath_refresh_statistics();
