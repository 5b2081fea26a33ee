-- A run is one trace: the run span's W3C traceparent, and the
-- root version the run's input descends from. See the Postgres
-- migration of the same number for the column's meaning.

-- +goose Up
ALTER TABLE runs ADD COLUMN trace_context TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN conversation_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN conversation_id;
ALTER TABLE runs DROP COLUMN trace_context;
