-- Nondeterminism caught: step input digests and accepted changes. See the
-- Postgres migration of the same number for the columns' meaning.

-- +goose Up
ALTER TABLE steps ADD COLUMN digest text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN changes_accepted_at TIMESTAMP;

-- +goose Down
ALTER TABLE runs DROP COLUMN changes_accepted_at;
ALTER TABLE steps DROP COLUMN digest;
