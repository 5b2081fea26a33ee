-- Redaction takes effect everywhere at once (issue #20). Every process
-- caches versions and transcripts (pkg/store/internal/graphrow Cache), and
-- a redaction is the one change to a stored chunk's content. redaction_epoch
-- holds one counter that every insert into redactions bumps, in the
-- redacting transaction; a store reads it before serving anything from its
-- cache and drops the cache when it changed. A read that starts after
-- rath_redact committed therefore sees the new epoch, and never the erased
-- text, in every process on this database.

-- +goose Up
CREATE TABLE redaction_epoch (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch bigint  NOT NULL
);
INSERT INTO redaction_epoch (one, epoch) SELECT true, count(*) FROM redactions;

-- +goose StatementBegin
CREATE FUNCTION rath_bump_redaction_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE redaction_epoch SET epoch = epoch + 1;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER redactions_bump_epoch AFTER INSERT ON redactions
    FOR EACH STATEMENT EXECUTE FUNCTION rath_bump_redaction_epoch();

-- +goose StatementBegin
DO $$
BEGIN
    -- rath_redact (the SECURITY DEFINER function's owner) inserts the
    -- redactions rows, so the trigger runs as that role.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_redact') THEN
        GRANT SELECT, UPDATE ON redaction_epoch TO rath_redact;
    END IF;
    -- Every store reads the epoch, whatever role its connections act as
    -- (00011): without it a store would serve nothing from its cache.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_coordinator') THEN
        GRANT SELECT ON redaction_epoch TO rath_coordinator;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rath_worker') THEN
        GRANT SELECT ON redaction_epoch TO rath_worker;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'rath: cannot grant redaction_epoch to the rath roles (%)', SQLERRM;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER redactions_bump_epoch ON redactions;
DROP FUNCTION rath_bump_redaction_epoch();
DROP TABLE redaction_epoch;
