-- Tenancy from the data, never a default (issue #19, findings 2 and 5;
-- docs/security.md). On top of 00011:
--
--   - A version's tenant is its connection's (rath.tenant), else the one
--     its system caller states, else its base's. There is no fallback to
--     'default': the column loses its default, and a version that gets no
--     tenant is refused. pgstore states its parents' tenant for a version
--     with parents but no base (compress, detach), and its operator's
--     choice for a root (docs/security.md).
--   - A version whose base or any parent (lineage) belongs to another
--     tenant is refused (check_violation). On a tenant connection another
--     tenant's base is invisible, which reads as the same refusal.
--   - A run's tenant is its connection's, else its input's; an input of
--     another tenant is refused.
--   - rath_worker (restrictive policies; the permissive ones of 00011 still
--     apply) may insert graph rows only for a step that is running, in the
--     tenant of that step's run (versions.run and versions.step name it:
--     every version a worker commits carries its producer); may set a
--     step's output only to the version keyed by that step's id; may set a
--     run's output only to the version keyed by one of its steps; and may
--     update only runs and steps that have not ended.

-- +goose Up
ALTER TABLE versions ALTER COLUMN tenant DROP DEFAULT;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_version_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    conn text := rath_tenant();
    base text;
BEGIN
    IF NEW.base_id IS NOT NULL THEN
        SELECT v.tenant INTO base FROM versions v WHERE v.id = NEW.base_id;
        IF NOT FOUND THEN
            -- The foreign key finds every row; row-level security hid it.
            RAISE EXCEPTION 'rath: version % extends version % of another tenant', NEW.id, NEW.base_id
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    IF conn IS NOT NULL THEN
        NEW.tenant := conn;
    ELSIF NEW.tenant IS NULL THEN
        NEW.tenant := base;
    END IF;
    IF NEW.tenant IS NULL THEN
        RAISE EXCEPTION 'rath: version % has no tenant: a root version needs rath.tenant or a stated tenant', NEW.id
            USING ERRCODE = 'not_null_violation';
    END IF;
    IF base IS DISTINCT FROM NULL AND base <> NEW.tenant THEN
        RAISE EXCEPTION 'rath: version % of tenant % extends version % of tenant %', NEW.id, NEW.tenant, NEW.base_id, base
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_run_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    input text;
BEGIN
    SELECT v.tenant INTO input FROM versions v WHERE v.id = NEW.input_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rath: run % reads version % of another tenant', NEW.id, NEW.input_id
            USING ERRCODE = 'check_violation';
    END IF;
    NEW.tenant := coalesce(rath_tenant(), input);
    IF NEW.tenant <> input THEN
        RAISE EXCEPTION 'rath: run % of tenant % reads version % of tenant %', NEW.id, NEW.tenant, NEW.input_id, input
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- rath_lineage_tenant: an edge joins two versions of one tenant.
-- +goose StatementBegin
CREATE FUNCTION rath_lineage_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    child text;
    parent text;
BEGIN
    SELECT v.tenant INTO child FROM versions v WHERE v.id = NEW.child_id;
    SELECT v.tenant INTO parent FROM versions v WHERE v.id = NEW.parent_id;
    IF child IS NULL OR parent IS NULL OR child <> parent THEN
        RAISE EXCEPTION 'rath: version % (tenant %) cannot have parent % (tenant %)', NEW.child_id,
            coalesce(child, 'unseen'), NEW.parent_id, coalesce(parent, 'unseen')
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER lineage_tenant BEFORE INSERT ON lineage FOR EACH ROW EXECUTE FUNCTION rath_lineage_tenant();

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_worker') THEN
        RAISE NOTICE 'rath: no role rath_worker: its policies are not created';
        RETURN;
    END IF;
    -- A worker writes the graph only for a step that is running, in the
    -- tenant of the step's run.
    CREATE POLICY versions_worker_step ON versions AS RESTRICTIVE FOR INSERT TO rath_worker
        WITH CHECK (EXISTS (SELECT 1 FROM steps s JOIN runs r ON r.id = s.run_id
                            WHERE s.id = versions.step AND r.id = versions.run
                              AND s.status = 'running' AND r.tenant = versions.tenant));
    CREATE POLICY chunks_worker_step ON chunks AS RESTRICTIVE FOR INSERT TO rath_worker
        WITH CHECK (EXISTS (SELECT 1 FROM versions v JOIN steps s ON s.id = v.step
                            WHERE v.id = chunks.version_id AND s.status = 'running'));
    CREATE POLICY lineage_worker_step ON lineage AS RESTRICTIVE FOR INSERT TO rath_worker
        WITH CHECK (EXISTS (SELECT 1 FROM versions v JOIN steps s ON s.id = v.step
                            WHERE v.id = lineage.child_id AND s.status = 'running'));
    -- A worker moves only open steps, and a step's output is the version
    -- keyed by the step.
    CREATE POLICY steps_worker_own ON steps AS RESTRICTIVE FOR UPDATE TO rath_worker
        USING (status IN ('pending', 'running', 'waiting'))
        WITH CHECK (output_id IS NULL
                    OR EXISTS (SELECT 1 FROM versions v WHERE v.id = steps.output_id AND v.key = steps.id));
    -- A worker settles only open runs, with the output of one of its steps.
    CREATE POLICY runs_worker_settle ON runs AS RESTRICTIVE FOR UPDATE TO rath_worker
        USING (status IN ('pending', 'running', 'waiting'))
        WITH CHECK (output_id IS NULL
                    OR EXISTS (SELECT 1 FROM steps s JOIN versions v ON v.key = s.id
                               WHERE s.run_id = runs.id AND v.id = runs.output_id));
    -- Policies restrict; they need a permissive policy for the same
    -- command to pass anything, which 00011's (for all roles) are.
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP POLICY IF EXISTS runs_worker_settle ON runs;
DROP POLICY IF EXISTS steps_worker_own ON steps;
DROP POLICY IF EXISTS lineage_worker_step ON lineage;
DROP POLICY IF EXISTS chunks_worker_step ON chunks;
DROP POLICY IF EXISTS versions_worker_step ON versions;
DROP TRIGGER lineage_tenant ON lineage;
DROP FUNCTION rath_lineage_tenant();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_run_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant := coalesce(rath_tenant(),
                           (SELECT v.tenant FROM versions v WHERE v.id = NEW.input_id),
                           'default');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_version_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.tenant := coalesce(rath_tenant(),
                           (SELECT v.tenant FROM versions v WHERE v.id = NEW.base_id),
                           'default');
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

ALTER TABLE versions ALTER COLUMN tenant SET DEFAULT 'default';
