-- A run's budget (tokens, cost), as JSON; '' means unlimited. The worker
-- enforces it: every step job carries the limits and what the run's earlier
-- steps used.

-- +goose Up
ALTER TABLE runs ADD COLUMN budget text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN budget;
