-- The hot tables' statistics as a store grows: Postgres only (see
-- postgres/00027). SQLite plans each statement with what its indexes say
-- and keeps no plan it would need to make again; this version changes
-- nothing here and keeps the two directories' versions in step.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
