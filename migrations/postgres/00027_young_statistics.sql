-- rath_refresh_statistics() takes the statistics of the hot tables of a
-- young store as it grows (issue 25).
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
-- The run store calls this as it grows (internal/runs, statistics.go).
-- When a hot table has grown fourfold since Postgres last measured it
-- (from 16 pages on, so a store's first rows cost nothing), it analyzes
-- that table and, in the same call, every other hot table that has
-- doubled, so that the tables' plans are made anew together rather than
-- once for each. ANALYZE changes the statistics, and every connection
-- plans the statements that read the table anew at their next use; making
-- a plan anew costs each connection milliseconds for each statement, so
-- the function stops once a table's statistics describe 256 pages (2 MiB
-- with 8 KiB pages; thousands of rows, which the plans read by key): a
-- table is analyzed three or four times in its life, and autovacuum's own
-- thresholds serve after that. It samples 3,000 rows, not 30,000
-- (default_statistics_target 10): what the plans need is the tables' size
-- and a rough picture of their keys, autovacuum's first ANALYZE writes the
-- full statistics, and the smaller sample makes an ANALYZE of 2,400 pages
-- of versions take 54 ms where the default took 582. The function runs as its owner (SECURITY
-- DEFINER: ANALYZE needs the table's owner), so the worker and coordinator
-- roles may call it; lock_timeout keeps it from waiting on autovacuum,
-- which holds the same lock while it works on a table: that table is
-- skipped until the next call. It returns how many tables it analyzed.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION rath_refresh_statistics() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '100ms'
    SET default_statistics_target = 10 AS $$
DECLARE
    hot CONSTANT regclass[] := ARRAY['runs', 'steps', 'versions', 'chunks', 'lineage']::regclass[];
    pages bigint[] := '{}';
    measured bigint[] := '{}';
    due boolean := false;
    n integer := 0;
BEGIN
    FOR i IN 1 .. array_length(hot, 1) LOOP
        pages[i] := pg_relation_size(hot[i]) / current_setting('block_size')::bigint;
        measured[i] := (SELECT relpages FROM pg_class WHERE oid = hot[i]);
        due := due OR (measured[i] < 256 AND pages[i] >= 16 AND pages[i] >= 4 * measured[i]);
    END LOOP;
    IF NOT due THEN
        RETURN 0;
    END IF;
    FOR i IN 1 .. array_length(hot, 1) LOOP
        IF measured[i] < 256 AND pages[i] >= 8 AND pages[i] >= 2 * measured[i] THEN
            BEGIN
                EXECUTE format('ANALYZE %s', hot[i]);
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
