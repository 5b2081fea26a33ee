-- The step journal (00022) under the rules every other table of a step
-- keeps (00011, 00016; docs/security.md):
--
--   - row-level security: on a tenant's connection a journal row is
--     visible, and writable, only when its step is (steps_tenant: the
--     step's run is the tenant's);
--   - rath_worker records and reads journals (insert, and update: a
--     resumed step records again what a call it re-ran returned), only for
--     a step that is running, and deletes only the payload rows of a step
--     that has committed (the version holds them); it never touches
--     another step's rows. Without these grants a worker that logs in as
--     rath_worker (compose, Kubernetes) failed every step.

-- +goose Up
ALTER TABLE step_journal ENABLE ROW LEVEL SECURITY;
ALTER TABLE step_journal FORCE ROW LEVEL SECURITY;
CREATE POLICY step_journal_tenant ON step_journal
    USING (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM steps s WHERE s.id = step_journal.step_id))
    WITH CHECK (rath_tenant() IS NULL OR EXISTS (SELECT 1 FROM steps s WHERE s.id = step_journal.step_id));

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_worker') THEN
        RAISE NOTICE 'rath: no role rath_worker: its step journal grants and policies are not created';
        RETURN;
    END IF;
    GRANT SELECT, INSERT, DELETE ON step_journal TO rath_worker;
    GRANT UPDATE (worker, data, recorded_at) ON step_journal TO rath_worker;
    CREATE POLICY step_journal_worker_write ON step_journal AS RESTRICTIVE FOR INSERT TO rath_worker
        WITH CHECK (EXISTS (SELECT 1 FROM steps s WHERE s.id = step_journal.step_id AND s.status = 'running'));
    CREATE POLICY step_journal_worker_rewrite ON step_journal AS RESTRICTIVE FOR UPDATE TO rath_worker
        USING (EXISTS (SELECT 1 FROM steps s WHERE s.id = step_journal.step_id AND s.status = 'running'));
    CREATE POLICY step_journal_worker_prune ON step_journal AS RESTRICTIVE FOR DELETE TO rath_worker
        USING (kind IN ('reply', 'start', 'result')
               AND EXISTS (SELECT 1 FROM versions v WHERE v.key = step_journal.step_id));
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'rath: cannot grant step_journal to rath_worker (%)', SQLERRM;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP POLICY IF EXISTS step_journal_worker_prune ON step_journal;
DROP POLICY IF EXISTS step_journal_worker_rewrite ON step_journal;
DROP POLICY IF EXISTS step_journal_worker_write ON step_journal;
DROP POLICY IF EXISTS step_journal_tenant ON step_journal;
ALTER TABLE step_journal NO FORCE ROW LEVEL SECURITY;
ALTER TABLE step_journal DISABLE ROW LEVEL SECURITY;
