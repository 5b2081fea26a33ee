-- Tenants for the memory plane are a Postgres feature (postgres/00015:
-- namespace ownership and row-level security). The embedded store serves
-- only the default tenant and records no owners; it gets the table anyway,
-- so the two dialects' schemas match, and so that processes migrating one
-- file at once detect a second application of this version (a migration
-- without DDL would be recorded twice: TestMigrateFromProcesses).

-- +goose Up
CREATE TABLE memory_namespaces (
    namespace  TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL DEFAULT 'default',
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- +goose Down
DROP TABLE memory_namespaces;
