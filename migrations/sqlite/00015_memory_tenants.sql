-- Tenants for the memory plane are a Postgres feature (postgres/00015:
-- namespace ownership and row-level security). The embedded store serves
-- only the default tenant, so this version changes nothing here; it keeps
-- the two dialects' versions aligned.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
