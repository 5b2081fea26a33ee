-- The Session Graph for the embedded store: versions, the chunks they append,
-- and lineage edges. Ids are canonical UUID text; created_at is fixed-width
-- RFC 3339 UTC text with nanoseconds. Rows are append-only: triggers refuse
-- UPDATE and DELETE.

-- +goose Up
CREATE TABLE versions (
    -- seq orders versions by commit; parents always have a smaller seq.
    seq               INTEGER PRIMARY KEY,
    id                TEXT    NOT NULL UNIQUE,
    base_id           TEXT    REFERENCES versions (id),
    op                TEXT    NOT NULL CHECK (op IN ('create', 'append', 'step', 'fork', 'detach', 'merge',
                                                     'compress', 'replay', 'import', 'redact', 'place')),
    len               INTEGER NOT NULL CHECK (len >= 0),
    own_count         INTEGER NOT NULL CHECK (own_count >= 0 AND own_count <= len),
    parent_count      INTEGER NOT NULL CHECK (parent_count >= 0),
    placement         TEXT    NOT NULL DEFAULT '{}',
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    run               TEXT,
    step              TEXT,
    agent             TEXT,
    model             TEXT,
    worker            TEXT,
    trace_id          TEXT,
    extras            TEXT    NOT NULL DEFAULT '[]',
    key               TEXT    UNIQUE,
    created_at        TEXT    NOT NULL,
    hash              TEXT    NOT NULL CHECK (length(hash) = 64)
);

CREATE INDEX versions_base_idx ON versions (base_id) WHERE base_id IS NOT NULL;
CREATE INDEX versions_roots_idx ON versions (seq) WHERE parent_count = 0;
CREATE INDEX versions_run_idx ON versions (run, seq) WHERE run IS NOT NULL;

CREATE TABLE chunks (
    version_id TEXT    NOT NULL REFERENCES versions (id),
    ord        INTEGER NOT NULL CHECK (ord >= 0),
    kind       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    hash       TEXT    NOT NULL CHECK (length(hash) = 64),
    PRIMARY KEY (version_id, ord)
) WITHOUT ROWID;

CREATE TABLE lineage (
    child_id  TEXT    NOT NULL REFERENCES versions (id),
    parent_id TEXT    NOT NULL REFERENCES versions (id),
    ordinal   INTEGER NOT NULL CHECK (ordinal >= 0),
    op        TEXT    NOT NULL,
    PRIMARY KEY (child_id, ordinal),
    UNIQUE (child_id, parent_id)
) WITHOUT ROWID;

CREATE INDEX lineage_parent_idx ON lineage (parent_id, child_id);

-- +goose StatementBegin
CREATE TRIGGER versions_no_update BEFORE UPDATE ON versions
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on versions refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER versions_no_delete BEFORE DELETE ON versions
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on versions refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER chunks_no_update BEFORE UPDATE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER chunks_no_delete BEFORE DELETE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER lineage_no_update BEFORE UPDATE ON lineage
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on lineage refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER lineage_no_delete BEFORE DELETE ON lineage
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on lineage refused: the session graph is append-only'); END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE lineage;
DROP TABLE chunks;
DROP TABLE versions;
