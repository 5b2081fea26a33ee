-- steps_open_idx goes: the reconciler finds stale steps through the open
-- runs. See the Postgres migration of the same number for why.

-- +goose Up
DROP INDEX steps_open_idx;

-- +goose Down
CREATE INDEX steps_open_idx ON steps (updated_at) WHERE status IN ('pending', 'running');
