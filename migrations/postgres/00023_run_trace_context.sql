-- A run is one trace: runs.trace_context is the W3C traceparent of the
-- run's span, recorded when the run is submitted (a child of the caller's
-- trace context, or a new root). Every step the run publishes, from any
-- coordinator and after any restart, is a child of it. '' for runs
-- submitted before this version or with tracing off.
-- runs.conversation_id is the root version the run's input descends from
-- (gen_ai.conversation.id on the run's spans); '' for older runs.

-- +goose Up
ALTER TABLE runs ADD COLUMN trace_context text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN conversation_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN conversation_id;
ALTER TABLE runs DROP COLUMN trace_context;
