-- The value lists that versions.op, runs.status, runs.kind and
-- steps.status may hold are checked through domains (issue 25).
--
-- Postgres prepares a table's CHECK constraints anew for every statement
-- that inserts or updates a row of it: each constraint's stored expression
-- is read back from its text, planned and compiled (ExecRelCheck), and a
-- list of values is the costliest kind to prepare. A one-row INSERT under
-- runs.status' list took 9.8-10.3 µs, under the cast below 4.7-5.4, with
-- no check 2.8-3.3 (BenchmarkValueListCheck, Postgres 15). A step writes these
-- tables in up to eleven statements (the submit's version, run and step,
-- the step's start, its version, its commit and the run's settling).
--
-- A domain's constraints are prepared once a connection and kept with the
-- type (Postgres' type cache), so a table constraint that casts the column
-- to a domain holding the list has only the cast to prepare for each
-- statement. The rule is the same: a value outside the list is refused
-- with check_violation (SQLSTATE 23514); the message names the domain's
-- constraint (rath_step_status_check, say) rather than the table's.
-- The columns keep their type, text, so nothing that reads or writes them
-- changes, and the table constraints keep their names.
--
-- Adding a value to a list is now ALTER DOMAIN … DROP CONSTRAINT and
-- ADD CONSTRAINT on the domain. Upgrading reads versions, runs and steps
-- once each to validate the new constraints, under the lock the migration
-- holds.

-- +goose Up
CREATE DOMAIN rath_version_op AS text CONSTRAINT rath_version_op_check
    CHECK (VALUE IN ('create', 'append', 'step', 'fork', 'detach', 'merge', 'compress', 'replay', 'import', 'redact', 'place'));
CREATE DOMAIN rath_run_status AS text CONSTRAINT rath_run_status_check
    CHECK (VALUE IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'canceled', 'timed_out'));
CREATE DOMAIN rath_run_kind AS text CONSTRAINT rath_run_kind_check
    CHECK (VALUE IN ('agent', 'workflow'));
CREATE DOMAIN rath_step_status AS text CONSTRAINT rath_step_status_check
    CHECK (VALUE IN ('pending', 'running', 'waiting', 'committed', 'failed', 'canceled'));

-- The columns are NOT NULL, so IS NOT NULL passes every value the cast
-- lets through.
ALTER TABLE versions DROP CONSTRAINT versions_op_check;
ALTER TABLE versions ADD CONSTRAINT versions_op_check CHECK ((op::rath_version_op) IS NOT NULL);
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK ((status::rath_run_status) IS NOT NULL);
ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK ((kind::rath_run_kind) IS NOT NULL);
ALTER TABLE steps DROP CONSTRAINT steps_status_check;
ALTER TABLE steps ADD CONSTRAINT steps_status_check CHECK ((status::rath_step_status) IS NOT NULL);

-- +goose Down
ALTER TABLE steps DROP CONSTRAINT steps_status_check;
ALTER TABLE steps ADD CONSTRAINT steps_status_check
    CHECK (status IN ('pending', 'running', 'waiting', 'committed', 'failed', 'canceled'));
ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('agent', 'workflow'));
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('pending', 'running', 'waiting', 'succeeded', 'failed', 'canceled', 'timed_out'));
ALTER TABLE versions DROP CONSTRAINT versions_op_check;
ALTER TABLE versions ADD CONSTRAINT versions_op_check
    CHECK (op IN ('create', 'append', 'step', 'fork', 'detach', 'merge', 'compress', 'replay', 'import', 'redact', 'place'));
DROP DOMAIN rath_step_status;
DROP DOMAIN rath_run_kind;
DROP DOMAIN rath_run_status;
DROP DOMAIN rath_version_op;
