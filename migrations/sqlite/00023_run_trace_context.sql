-- A run is one trace: the run span's W3C traceparent. See the Postgres
-- migration of the same number for the column's meaning.

-- +goose Up
ALTER TABLE runs ADD COLUMN trace_context TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN trace_context;
