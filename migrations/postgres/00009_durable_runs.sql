-- Durable runs (workflows): run kinds, the waiting and timed_out states,
-- per-run deadlines, and steps addressed by key with their own target.
--
-- runs.kind is 'agent' (one step that settles the run) or 'workflow' (steps
-- added by a driver, which also sets the run's output); runs.driver says who
-- drives a workflow run ('coordinator' for a declarative file held in
-- runs.workflow, 'client' for a user's program). runs.deadline, when set,
-- ends the run timed_out. A step's target is its own call ('' means the
-- run's target). Step ordinals are insertion order, no longer unique: a
-- workflow's steps are named by key (id "<run>/<key>").

-- +goose Up
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'canceled', 'timed_out'));
ALTER TABLE runs
    ADD COLUMN kind text NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent', 'workflow')),
    ADD COLUMN driver text NOT NULL DEFAULT '',
    ADD COLUMN workflow text NOT NULL DEFAULT '',
    ADD COLUMN deadline timestamptz;
CREATE INDEX runs_deadline_idx ON runs (deadline) WHERE deadline IS NOT NULL AND status IN ('pending', 'running', 'waiting');

ALTER TABLE steps DROP CONSTRAINT steps_status_check;
ALTER TABLE steps ADD CONSTRAINT steps_status_check
    CHECK (status IN ('pending', 'running', 'waiting', 'committed', 'failed', 'canceled'));
ALTER TABLE steps ADD COLUMN target text NOT NULL DEFAULT '';
ALTER TABLE steps DROP CONSTRAINT steps_run_id_ordinal_key;
CREATE INDEX steps_run_idx ON steps (run_id, ordinal);

-- +goose Down
DROP INDEX steps_run_idx;
UPDATE steps SET ordinal = sub.rn - 1 FROM (
    SELECT id, row_number() OVER (PARTITION BY run_id ORDER BY ordinal, created_at, id) AS rn FROM steps
) sub WHERE steps.id = sub.id;
ALTER TABLE steps ADD CONSTRAINT steps_run_id_ordinal_key UNIQUE (run_id, ordinal);
ALTER TABLE steps DROP COLUMN target;
UPDATE steps SET status = 'running' WHERE status = 'waiting';
ALTER TABLE steps DROP CONSTRAINT steps_status_check;
ALTER TABLE steps ADD CONSTRAINT steps_status_check
    CHECK (status IN ('pending', 'running', 'committed', 'failed', 'canceled'));

DROP INDEX runs_deadline_idx;
ALTER TABLE runs DROP COLUMN deadline, DROP COLUMN workflow, DROP COLUMN driver, DROP COLUMN kind;
UPDATE runs SET status = 'running' WHERE status = 'waiting';
UPDATE runs SET status = 'failed', error = CASE WHEN error = '' THEN 'timed out' ELSE error END WHERE status = 'timed_out';
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'canceled'));
