-- Retention (pkg/lineage GC, `rathctl gc`, `rathctl pin`): pinned versions,
-- and the one path allowed past the append-only triggers.
--
-- rath_gc(keep_since, dry_run) deletes the versions (with their chunks and
-- lineage edges) that nothing keeps: a version is kept when it is pinned, is
-- a run's or a step's input or output, wrote a memory item, was created at
-- or after keep_since, or is an ancestor (parent or base) of a kept version. It is SECURITY
-- DEFINER and owned by the NOLOGIN role rath_gc, and the append-only trigger
-- function lets DELETE through only when current_user is rath_gc, that is
-- only inside this function: application connections still cannot UPDATE or
-- DELETE graph rows. When the migrating user may not create roles, the
-- function stays owned by it and every gc is refused by the triggers.

-- +goose Up
CREATE TABLE pins (
    version_id uuid        PRIMARY KEY REFERENCES versions (id),
    note       text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The retention function (rath_gc, below) runs as rath_gc and may
    -- delete rows nothing keeps; nothing else may change graph rows.
    IF TG_OP = 'DELETE' AND current_user = 'rath_gc' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'rath: % on % refused: the session graph is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION rath_gc(keep_since timestamptz, dry_run boolean DEFAULT false)
RETURNS TABLE (freed_versions bigint, freed_chunks bigint, freed_edges bigint, freed_bytes bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    doomed uuid[];
BEGIN
    WITH RECURSIVE kept(id) AS (
        SELECT p.version_id FROM pins p
        UNION SELECT r.input_id FROM runs r
        UNION SELECT r.output_id FROM runs r WHERE r.output_id IS NOT NULL
        UNION SELECT s.input_id FROM steps s
        UNION SELECT s.output_id FROM steps s WHERE s.output_id IS NOT NULL
        UNION SELECT v.id FROM versions v WHERE v.created_at >= keep_since
        UNION SELECT v.id FROM versions v JOIN memory_items m ON m.version_id = v.id::text
        UNION
        SELECT up.id
        FROM kept k
        CROSS JOIN LATERAL (
            SELECT l.parent_id FROM lineage l WHERE l.child_id = k.id
            UNION ALL
            SELECT v.base_id FROM versions v WHERE v.id = k.id AND v.base_id IS NOT NULL
        ) AS up(id)
    )
    SELECT coalesce(array_agg(v.id), '{}') INTO doomed
    FROM versions v
    WHERE NOT EXISTS (SELECT 1 FROM kept WHERE kept.id = v.id);

    SELECT count(*), coalesce(sum(pg_column_size(v.*)), 0) INTO freed_versions, freed_bytes
    FROM versions v WHERE v.id = ANY (doomed);
    SELECT count(*), freed_bytes + coalesce(sum(pg_column_size(c.*)), 0) INTO freed_chunks, freed_bytes
    FROM chunks c WHERE c.version_id = ANY (doomed);
    SELECT count(*), freed_bytes + coalesce(sum(pg_column_size(l.*)), 0) INTO freed_edges, freed_bytes
    FROM lineage l WHERE l.child_id = ANY (doomed);
    IF NOT dry_run THEN
        DELETE FROM lineage WHERE child_id = ANY (doomed);
        DELETE FROM chunks WHERE version_id = ANY (doomed);
        DELETE FROM versions WHERE id = ANY (doomed);
    END IF;
    RETURN NEXT;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    BEGIN
        CREATE ROLE rath_gc NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO rath_gc', current_schema());
    GRANT SELECT ON pins, runs, steps, memory_items TO rath_gc;
    GRANT SELECT, DELETE ON versions, chunks, lineage TO rath_gc;
    -- Owning the function needs membership for a moment; the migrating
    -- user does not keep it, so it cannot SET ROLE rath_gc afterwards.
    EXECUTE format('GRANT rath_gc TO %I', current_user);
    ALTER FUNCTION rath_gc(timestamptz, boolean) OWNER TO rath_gc;
    EXECUTE format('REVOKE rath_gc FROM %I', current_user);
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE NOTICE 'rath: cannot set up role rath_gc (%): rath_gc() will be refused by the append-only triggers', SQLERRM;
END;
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION rath_gc(timestamptz, boolean) FROM PUBLIC;
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('GRANT EXECUTE ON FUNCTION rath_gc(timestamptz, boolean) TO %I', current_user);
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rath_gc(timestamptz, boolean);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rath: % on % refused: the session graph is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd
DROP TABLE pins;
