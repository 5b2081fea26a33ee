-- Tenancy from the data (postgres/00016). The embedded store serves only
-- the default tenant, so every version belongs to it: the column says so
-- and refuses any other, and an edge between versions of two tenants is
-- refused as on Postgres (it cannot happen while the check holds; the
-- trigger keeps the two dialects' rules alike should that ever change).
-- The worker-role policies have no SQLite counterpart: SQLite has no roles.

-- +goose Up
ALTER TABLE versions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default' CHECK (tenant = 'default');

-- +goose StatementBegin
CREATE TRIGGER lineage_tenant BEFORE INSERT ON lineage
WHEN (SELECT tenant FROM versions WHERE id = NEW.child_id) IS NOT (SELECT tenant FROM versions WHERE id = NEW.parent_id)
BEGIN
    SELECT RAISE(ABORT, 'rath: a version and its parent belong to different tenants');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER lineage_tenant;
ALTER TABLE versions DROP COLUMN tenant;
