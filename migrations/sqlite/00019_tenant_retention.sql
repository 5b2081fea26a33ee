-- Retention and redaction per tenant: Postgres only (row-level security on
-- pins and redactions; see postgres/00019). The embedded store serves one
-- tenant, so this version changes nothing here; it keeps the two
-- directories' versions in step.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
