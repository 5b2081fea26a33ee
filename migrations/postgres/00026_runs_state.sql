-- A run's row is rewritten when its first step starts (pending to
-- running), when it waits on a review and goes on (running to waiting
-- and back), and when it ends. runs_status_idx (00003) and the predicate
-- of runs_deadline_idx (00009) covered status, which each of those
-- rewrites changes, so none could be a HOT update: each added an entry to
-- every index of runs (issue 25).
--
-- state is status with the open statuses folded into one, 'open'; it
-- changes only when the run ends. The indexes take it in status' place,
-- so that every rewrite of an open run leaves the indexes alone, and the
-- queries that want the open runs, or runs by status, ask for the state
-- too (runs.Store). status is unchanged and stays what users read.
--
-- Adding a stored generated column rewrites the table once, under a lock
-- that holds writes to runs back for the time it takes (docs/deploy.md,
-- "Upgrades").

-- +goose Up
ALTER TABLE runs ADD COLUMN state text GENERATED ALWAYS AS
    (CASE WHEN status IN ('pending', 'running', 'waiting') THEN 'open' ELSE status END) STORED;
CREATE INDEX runs_state_idx ON runs (state, id);
DROP INDEX runs_status_idx;
DROP INDEX runs_deadline_idx;
CREATE INDEX runs_deadline_idx ON runs (deadline) WHERE deadline IS NOT NULL AND state = 'open';

-- +goose Down
DROP INDEX runs_deadline_idx;
CREATE INDEX runs_deadline_idx ON runs (deadline) WHERE deadline IS NOT NULL AND status IN ('pending', 'running', 'waiting');
CREATE INDEX runs_status_idx ON runs (status, id);
DROP INDEX runs_state_idx;
ALTER TABLE runs DROP COLUMN state;
