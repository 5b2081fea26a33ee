-- Runs, their steps, and leases: the bookkeeping that drives execution.
-- Unlike the graph tables these rows change state, so they are not append-only;
-- the results they point at (versions) are.

-- +goose Up
CREATE TABLE runs (
    id         text PRIMARY KEY,
    status     text NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'canceled')),
    queue      text NOT NULL,
    target     text NOT NULL,
    input_id   uuid NOT NULL REFERENCES versions (id),
    output_id  uuid REFERENCES versions (id),
    error      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX runs_status_idx ON runs (status, id);

CREATE TABLE steps (
    id          text PRIMARY KEY,
    run_id      text NOT NULL REFERENCES runs (id),
    ordinal     integer NOT NULL,
    status      text NOT NULL CHECK (status IN ('pending', 'running', 'committed', 'failed', 'canceled')),
    input_id    uuid NOT NULL REFERENCES versions (id),
    output_id   uuid REFERENCES versions (id),
    attempts    integer NOT NULL DEFAULT 0,
    worker      text NOT NULL DEFAULT '',
    error       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    started_at  timestamptz,
    finished_at timestamptz,
    UNIQUE (run_id, ordinal)
);
CREATE INDEX steps_open_idx ON steps (updated_at) WHERE status IN ('pending', 'running');

CREATE TABLE leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE leases;
DROP TABLE steps;
DROP TABLE runs;
