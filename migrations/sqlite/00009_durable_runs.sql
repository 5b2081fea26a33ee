-- Durable runs (workflows): run kinds, the waiting and timed_out states,
-- per-run deadlines, and steps addressed by key with their own target.
-- See the Postgres migration of the same number for the columns' meaning.
--
-- SQLite cannot alter a CHECK constraint, so both tables are rebuilt. The
-- new steps table first references runs_new; renaming runs_new to runs
-- rewrites that reference, so foreign keys stay on throughout.

-- +goose Up
CREATE TABLE runs_new (
    id         text PRIMARY KEY,
    status     text NOT NULL CHECK (status IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'canceled', 'timed_out')),
    queue      text NOT NULL,
    target     text NOT NULL,
    input_id   text NOT NULL REFERENCES versions (id),
    output_id  text REFERENCES versions (id),
    error      text NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    budget     text NOT NULL DEFAULT '',
    kind       text NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent', 'workflow')),
    driver     text NOT NULL DEFAULT '',
    workflow   text NOT NULL DEFAULT '',
    deadline   TIMESTAMP
);
INSERT INTO runs_new (id, status, queue, target, input_id, output_id, error, created_at, updated_at, budget)
    SELECT id, status, queue, target, input_id, output_id, error, created_at, updated_at, budget FROM runs;

CREATE TABLE steps_new (
    id          text PRIMARY KEY,
    run_id      text NOT NULL REFERENCES runs_new (id),
    ordinal     integer NOT NULL,
    status      text NOT NULL CHECK (status IN ('pending', 'running', 'waiting', 'committed', 'failed', 'canceled')),
    input_id    text NOT NULL REFERENCES versions (id),
    output_id   text REFERENCES versions (id),
    attempts    integer NOT NULL DEFAULT 0,
    worker      text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    started_at  TIMESTAMP,
    finished_at TIMESTAMP,
    target      text NOT NULL DEFAULT ''
);
INSERT INTO steps_new (id, run_id, ordinal, status, input_id, output_id, attempts, worker, error, created_at, updated_at, started_at, finished_at)
    SELECT id, run_id, ordinal, status, input_id, output_id, attempts, worker, error, created_at, updated_at, started_at, finished_at FROM steps;

DROP TABLE steps;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
ALTER TABLE steps_new RENAME TO steps;
CREATE INDEX runs_status_idx ON runs (status, id);
CREATE INDEX runs_deadline_idx ON runs (deadline) WHERE deadline IS NOT NULL AND status IN ('pending', 'running', 'waiting');
CREATE INDEX steps_open_idx ON steps (updated_at) WHERE status IN ('pending', 'running');
CREATE INDEX steps_run_idx ON steps (run_id, ordinal);

-- +goose Down
CREATE TABLE runs_old (
    id         text PRIMARY KEY,
    status     text NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'canceled')),
    queue      text NOT NULL,
    target     text NOT NULL,
    input_id   text NOT NULL REFERENCES versions (id),
    output_id  text REFERENCES versions (id),
    error      text NOT NULL DEFAULT '',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    budget     text NOT NULL DEFAULT ''
);
INSERT INTO runs_old (id, status, queue, target, input_id, output_id, error, created_at, updated_at, budget)
    SELECT id,
           CASE status WHEN 'waiting' THEN 'running' WHEN 'timed_out' THEN 'failed' ELSE status END,
           queue, target, input_id, output_id,
           CASE WHEN status = 'timed_out' AND error = '' THEN 'timed out' ELSE error END,
           created_at, updated_at, budget FROM runs;
CREATE TABLE steps_old (
    id          text PRIMARY KEY,
    run_id      text NOT NULL REFERENCES runs_old (id),
    ordinal     integer NOT NULL,
    status      text NOT NULL CHECK (status IN ('pending', 'running', 'committed', 'failed', 'canceled')),
    input_id    text NOT NULL REFERENCES versions (id),
    output_id   text REFERENCES versions (id),
    attempts    integer NOT NULL DEFAULT 0,
    worker      text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    started_at  TIMESTAMP,
    finished_at TIMESTAMP,
    UNIQUE (run_id, ordinal)
);
INSERT INTO steps_old (id, run_id, ordinal, status, input_id, output_id, attempts, worker, error, created_at, updated_at, started_at, finished_at)
    SELECT id, run_id,
           (SELECT count(*) FROM steps p WHERE p.run_id = s.run_id AND (p.ordinal < s.ordinal OR (p.ordinal = s.ordinal AND p.id < s.id))),
           CASE status WHEN 'waiting' THEN 'running' ELSE status END,
           input_id, output_id, attempts, worker, error, created_at, updated_at, started_at, finished_at FROM steps s;
DROP TABLE steps;
DROP TABLE runs;
ALTER TABLE runs_old RENAME TO runs;
ALTER TABLE steps_old RENAME TO steps;
CREATE INDEX runs_status_idx ON runs (status, id);
CREATE INDEX steps_open_idx ON steps (updated_at) WHERE status IN ('pending', 'running');
