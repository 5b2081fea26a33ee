-- Two tenant-isolation fixes (issue #19, findings 8 and 12); see
-- postgres/00017.
--
-- 1. Placements naming another tenant's snapshot: nothing to do here. The
-- embedded store serves only the default tenant (docs/security.md), so
-- every snapshot a placement can name is already its tenant's.
--
-- 2. Redaction markers are recorded exactly: redaction_markers keeps the
-- marker bytes each redaction wrote (pkg/lineage Retention.Redact inserts
-- them in its own write transaction, beside the redactions rows), and the
-- store's Verify reports a marker whose bytes are not recorded for its
-- hash. Markers written before this migration are recorded as they stand
-- now.

-- +goose Up
CREATE TABLE redaction_markers (
    hash        TEXT NOT NULL CHECK (length(hash) = 64),
    marker      TEXT NOT NULL,
    recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX redaction_markers_hash_idx ON redaction_markers (hash);

-- +goose StatementBegin
CREATE TRIGGER redaction_markers_no_update BEFORE UPDATE ON redaction_markers
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on redaction_markers refused: redaction markers are append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER redaction_markers_no_delete BEFORE DELETE ON redaction_markers
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on redaction_markers refused: redaction markers are append-only'); END;
-- +goose StatementEnd

INSERT INTO redaction_markers (hash, marker)
SELECT DISTINCT c.hash, c.payload FROM chunks c
WHERE substr(c.payload, 1, 17) = '{"rath_redacted":'
  AND EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash);

-- +goose Down
DROP TABLE redaction_markers;
