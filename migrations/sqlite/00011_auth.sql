-- API tokens (internal/auth). Only a token's SHA-256 hash is stored; the
-- token itself is shown once, when it is made. The embedded store serves one
-- tenant ("default"): tenants are a Postgres feature (row-level security),
-- so the tenant column is here only to keep the two schemas alike.

-- +goose Up
CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),
    name         TEXT NOT NULL DEFAULT '',
    tenant       TEXT NOT NULL DEFAULT 'default',
    scope        TEXT NOT NULL CHECK (scope IN ('read', 'submit', 'admin')),
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);

-- +goose Down
DROP TABLE api_tokens;
