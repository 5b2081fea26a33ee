-- Redaction for the embedded store (pkg/lineage Retention.Redact, `rathctl
-- redact`): a chunk's content is replaced by a marker that keeps its hash,
-- and the redaction is recorded in redactions. SQLite has no roles: the
-- chunks UPDATE trigger lets a row through only while rath_redact_running
-- holds a row, which Redact inserts and removes inside its own write
-- transaction (the store has one writer, so no other connection ever sees
-- it), and even then only a payload change to a marker keeping the row's
-- hash. redactions has no foreign key: the record outlives a gc.

-- +goose Up
CREATE TABLE redactions (
    version_id  TEXT    NOT NULL,
    ord         INTEGER NOT NULL,
    hash        TEXT    NOT NULL CHECK (length(hash) = 64),
    reason      TEXT    NOT NULL,
    redacted_at TEXT    NOT NULL,
    redacted_by TEXT    NOT NULL,
    PRIMARY KEY (version_id, ord)
) WITHOUT ROWID;
CREATE INDEX redactions_hash_idx ON redactions (hash);

CREATE TABLE rath_redact_running (token INTEGER NOT NULL);

DROP TRIGGER chunks_no_update;
-- +goose StatementBegin
CREATE TRIGGER chunks_no_update BEFORE UPDATE ON chunks
WHEN NOT EXISTS (SELECT 1 FROM rath_redact_running)
  OR NEW.version_id IS NOT OLD.version_id OR NEW.ord IS NOT OLD.ord OR NEW.kind IS NOT OLD.kind
  OR NEW.hash IS NOT OLD.hash OR NEW.lane IS NOT OLD.lane
  OR substr(NEW.payload, 1, 17) <> '{"rath_redacted":'
  OR json_extract(NEW.payload, '$.rath_redacted.hash') IS NOT OLD.hash
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER redactions_no_update BEFORE UPDATE ON redactions
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on redactions refused: redactions are append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER redactions_no_delete BEFORE DELETE ON redactions
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on redactions refused: redactions are append-only'); END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER chunks_no_update;
-- +goose StatementBegin
CREATE TRIGGER chunks_no_update BEFORE UPDATE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
DROP TABLE rath_redact_running;
DROP TABLE redactions;
