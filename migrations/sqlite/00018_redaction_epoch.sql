-- Redaction takes effect everywhere at once (issue #20); see
-- postgres/00018. redaction_epoch holds one counter that every insert into
-- redactions bumps, in Retention.Redact's write transaction; the store
-- reads it before serving from its cache and drops the cache when it
-- changed, so a process sharing the file (rathctl dev) never serves a
-- redacted chunk's old content once redact returned.

-- +goose Up
CREATE TABLE redaction_epoch (
    one   INTEGER PRIMARY KEY CHECK (one = 1),
    epoch INTEGER NOT NULL
);
INSERT INTO redaction_epoch (one, epoch) SELECT 1, count(*) FROM redactions;

-- +goose StatementBegin
CREATE TRIGGER redactions_bump_epoch AFTER INSERT ON redactions
BEGIN
    UPDATE redaction_epoch SET epoch = epoch + 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER redactions_bump_epoch;
DROP TABLE redaction_epoch;
