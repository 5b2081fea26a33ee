-- state: status with the open statuses folded into 'open', indexed in
-- status' place. See the Postgres migration of the same number for why;
-- here it is a virtual column (SQLite adds only those to a table).

-- +goose Up
ALTER TABLE runs ADD COLUMN state TEXT GENERATED ALWAYS AS
    (CASE WHEN status IN ('pending', 'running', 'waiting') THEN 'open' ELSE status END) VIRTUAL;
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
