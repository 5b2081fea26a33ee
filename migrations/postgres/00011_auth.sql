-- Authentication, tenants and database roles (internal/auth, docs/security.md).
--
-- api_tokens: API tokens; only a token's SHA-256 hash is stored.
--
-- Tenants: versions and runs carry a tenant. A connection that sets the
-- session setting rath.tenant (the coordinator's per-tenant pools do, at
-- connect time) sees and writes only that tenant's rows: row-level security,
-- FORCEd so that the tables' owner is held to it too. A connection that does
-- not set it is system work (workers, the reconciler, migrations): it sees
-- every row. A new version takes its tenant from rath.tenant when set, else
-- from its base version (a worker's step output belongs to its input's
-- tenant), else 'default'. Superusers and BYPASSRLS roles skip row-level
-- security altogether, which is why tenant pools SET ROLE rath_coordinator.
--
-- Roles (created when the migrating user may; skipped with a notice
-- otherwise): rath_coordinator may read and write what the API needs;
-- rath_worker may insert and read graph rows but not update or delete them
-- (privileges, on top of the append-only triggers), update only the run and
-- step columns a step moves, and cannot read api_tokens. Both are NOLOGIN:
-- grant them to login users, or ALTER ROLE … LOGIN PASSWORD ….

-- +goose Up
CREATE TABLE api_tokens (
    id           text        PRIMARY KEY,
    hash         text        NOT NULL UNIQUE CHECK (length(hash) = 64),
    name         text        NOT NULL DEFAULT '',
    tenant       text        NOT NULL DEFAULT 'default',
    scope        text        NOT NULL CHECK (scope IN ('read', 'submit', 'admin')),
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

ALTER TABLE versions ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE runs ADD COLUMN tenant text NOT NULL DEFAULT 'default';
CREATE INDEX runs_tenant_idx ON runs (tenant, id);

-- rath_tenant: the connection's tenant, NULL for system work.
CREATE FUNCTION rath_tenant() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT nullif(current_setting('rath.tenant', true), '')
$$;

-- +goose StatementBegin
CREATE FUNCTION rath_version_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant := coalesce(rath_tenant(),
                           (SELECT v.tenant FROM versions v WHERE v.id = NEW.base_id),
                           'default');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION rath_run_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant := coalesce(rath_tenant(),
                           (SELECT v.tenant FROM versions v WHERE v.id = NEW.input_id),
                           'default');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER versions_tenant BEFORE INSERT ON versions FOR EACH ROW EXECUTE FUNCTION rath_version_tenant();
CREATE TRIGGER runs_tenant BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION rath_run_tenant();

ALTER TABLE versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE versions FORCE ROW LEVEL SECURITY;
CREATE POLICY versions_tenant ON versions
    USING (rath_tenant() IS NULL OR tenant = rath_tenant())
    WITH CHECK (rath_tenant() IS NULL OR tenant = rath_tenant());

-- Chunks and edges belong to their version's tenant: the subquery reads
-- versions, itself under row-level security.
ALTER TABLE chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE chunks FORCE ROW LEVEL SECURITY;
CREATE POLICY chunks_tenant ON chunks
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM versions v WHERE v.id = chunks.version_id))
    WITH CHECK (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM versions v WHERE v.id = chunks.version_id));

ALTER TABLE lineage ENABLE ROW LEVEL SECURITY;
ALTER TABLE lineage FORCE ROW LEVEL SECURITY;
CREATE POLICY lineage_tenant ON lineage
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM versions v WHERE v.id = lineage.child_id))
    WITH CHECK (rath_tenant() IS NULL OR (EXISTS (SELECT 1 FROM versions v WHERE v.id = lineage.child_id)
                                      AND EXISTS (SELECT 1 FROM versions v WHERE v.id = lineage.parent_id)));

ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE runs FORCE ROW LEVEL SECURITY;
CREATE POLICY runs_tenant ON runs
    USING (rath_tenant() IS NULL OR tenant = rath_tenant())
    WITH CHECK (rath_tenant() IS NULL OR tenant = rath_tenant());

ALTER TABLE steps ENABLE ROW LEVEL SECURITY;
ALTER TABLE steps FORCE ROW LEVEL SECURITY;
CREATE POLICY steps_tenant ON steps
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.id = steps.run_id))
    WITH CHECK (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM runs r WHERE r.id = steps.run_id));

-- Tokens are read only through system connections (the coordinator's
-- authenticator, rathctl with store access): a tenant connection sees none.
ALTER TABLE api_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE api_tokens FORCE ROW LEVEL SECURITY;
CREATE POLICY api_tokens_system ON api_tokens USING (rath_tenant() IS NULL) WITH CHECK (rath_tenant() IS NULL);

-- +goose StatementBegin
DO $$
BEGIN
    BEGIN
        CREATE ROLE rath_coordinator NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE rath_worker NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    -- Let the migrating user SET ROLE to them (tenant pools do).
    BEGIN
        EXECUTE format('GRANT rath_coordinator, rath_worker TO %I', current_user);
    EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
        RAISE NOTICE 'rath: cannot grant rath_coordinator/rath_worker to %: %', current_user, SQLERRM;
    END;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'rath: no CREATEROLE privilege, roles rath_coordinator and rath_worker not created: %', SQLERRM;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_coordinator') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO rath_coordinator', current_schema());
        FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'goose_db_version' LOOP
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO rath_coordinator', t);
        END LOOP;
        EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO rath_coordinator', current_schema());
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO rath_coordinator', current_schema());
        -- Tables later migrations create get the same grants.
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO rath_coordinator', current_schema());
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO rath_coordinator', current_schema());
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_worker') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO rath_worker', current_schema());
        -- The graph: insert and read, never update or delete.
        GRANT SELECT, INSERT ON versions, chunks, lineage TO rath_worker;
        -- Runs and steps: read; move a step and settle its run.
        GRANT SELECT ON runs, leases, goose_db_version TO rath_worker;
        GRANT UPDATE (status, error, output_id, updated_at) ON runs TO rath_worker;
        GRANT SELECT, INSERT ON steps TO rath_worker;
        GRANT UPDATE (status, attempts, worker, error, output_id, started_at, finished_at, updated_at) ON steps TO rath_worker;
        -- Memory: the worker recalls and commits memories (tombstones and
        -- index maintenance included).
        FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'memory\_%' LOOP
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO rath_worker', t);
        END LOOP;
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO rath_worker', current_schema());
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP POLICY api_tokens_system ON api_tokens;
DROP POLICY steps_tenant ON steps;
ALTER TABLE steps NO FORCE ROW LEVEL SECURITY;
ALTER TABLE steps DISABLE ROW LEVEL SECURITY;
DROP POLICY runs_tenant ON runs;
ALTER TABLE runs NO FORCE ROW LEVEL SECURITY;
ALTER TABLE runs DISABLE ROW LEVEL SECURITY;
DROP POLICY lineage_tenant ON lineage;
ALTER TABLE lineage NO FORCE ROW LEVEL SECURITY;
ALTER TABLE lineage DISABLE ROW LEVEL SECURITY;
DROP POLICY chunks_tenant ON chunks;
ALTER TABLE chunks NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunks DISABLE ROW LEVEL SECURITY;
DROP POLICY versions_tenant ON versions;
ALTER TABLE versions NO FORCE ROW LEVEL SECURITY;
ALTER TABLE versions DISABLE ROW LEVEL SECURITY;
DROP TRIGGER runs_tenant ON runs;
DROP TRIGGER versions_tenant ON versions;
DROP FUNCTION rath_run_tenant();
DROP FUNCTION rath_version_tenant();
DROP FUNCTION rath_tenant();
DROP INDEX runs_tenant_idx;
ALTER TABLE runs DROP COLUMN tenant;
ALTER TABLE versions DROP COLUMN tenant;
DROP TABLE api_tokens;
