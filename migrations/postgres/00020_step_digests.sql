-- Nondeterminism caught: each workflow step records the digest of its
-- input (flow.StepDigest: the input version id and the step's call), and a
-- run records when its owner accepted changed steps.
--
-- steps.digest is '' for steps recorded before this version (they are not
-- compared). runs.changes_accepted_at, when set, lets a re-executed driver
-- keep a step whose input changed (the change is recorded as an event).

-- +goose Up
ALTER TABLE steps ADD COLUMN digest text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN changes_accepted_at timestamptz;

-- +goose Down
ALTER TABLE runs DROP COLUMN changes_accepted_at;
ALTER TABLE steps DROP COLUMN digest;
