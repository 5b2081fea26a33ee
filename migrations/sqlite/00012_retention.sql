-- Retention for the embedded store (pkg/lineage GC, `rathctl gc`,
-- `rathctl pin`): pinned versions, and the one path past the append-only
-- triggers. SQLite has no roles: the DELETE triggers let rows go only while
-- rath_gc_running holds a row, which GC inserts and removes inside its own
-- write transaction (the store has one writer, so no other connection ever
-- sees it). UPDATE stays refused always.

-- +goose Up
CREATE TABLE pins (
    version_id TEXT PRIMARY KEY REFERENCES versions (id),
    note       TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE rath_gc_running (token INTEGER NOT NULL);

DROP TRIGGER versions_no_delete;
DROP TRIGGER chunks_no_delete;
DROP TRIGGER lineage_no_delete;
-- +goose StatementBegin
CREATE TRIGGER versions_no_delete BEFORE DELETE ON versions WHEN NOT EXISTS (SELECT 1 FROM rath_gc_running)
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on versions refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER chunks_no_delete BEFORE DELETE ON chunks WHEN NOT EXISTS (SELECT 1 FROM rath_gc_running)
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER lineage_no_delete BEFORE DELETE ON lineage WHEN NOT EXISTS (SELECT 1 FROM rath_gc_running)
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on lineage refused: the session graph is append-only'); END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER versions_no_delete;
DROP TRIGGER chunks_no_delete;
DROP TRIGGER lineage_no_delete;
-- +goose StatementBegin
CREATE TRIGGER versions_no_delete BEFORE DELETE ON versions
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on versions refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER chunks_no_delete BEFORE DELETE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER lineage_no_delete BEFORE DELETE ON lineage
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on lineage refused: the session graph is append-only'); END;
-- +goose StatementEnd
DROP TABLE rath_gc_running;
DROP TABLE pins;
