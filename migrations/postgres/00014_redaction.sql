-- Redaction (pkg/lineage Retention.Redact, `rathctl redact`): a chunk's
-- content is replaced by a marker that keeps its hash, so every version hash
-- over it still verifies, and the redaction is recorded in redactions.
--
-- rath_redact(version, ord, reason, payload) is the one path allowed to
-- UPDATE graph rows. It is SECURITY DEFINER and owned by the NOLOGIN role
-- rath_redact; the append-only trigger function lets an UPDATE of chunks
-- through only when current_user is rath_redact (only inside that function)
-- and only the payload changes to a redaction marker that keeps the row's
-- hash. The marker's bytes are built by Go (session.Redact: canonical JSON);
-- the function checks they mean exactly the marker for this row (jsonb
-- equality: the row's hash, the reason, and only the tool call ids and names)
-- before writing them to every chunk row with the same hash (a merge stores
-- copies), recording one redactions row each. redactions has no foreign key:
-- a redaction's record outlives a gc of its version.

-- +goose Up
CREATE TABLE redactions (
    version_id  uuid        NOT NULL,
    ord         integer     NOT NULL,
    hash        text        NOT NULL CHECK (length(hash) = 64),
    reason      text        NOT NULL,
    redacted_at timestamptz NOT NULL DEFAULT now(),
    redacted_by text        NOT NULL,
    PRIMARY KEY (version_id, ord)
);
CREATE INDEX redactions_hash_idx ON redactions (hash);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- rath_gc may delete rows nothing keeps; rath_redact may replace a
    -- chunk's payload with a marker keeping its hash. Nothing else may
    -- change graph rows.
    IF TG_OP = 'DELETE' AND current_user = 'rath_gc' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'chunks' AND current_user = 'rath_redact' THEN
        -- A separate statement: NEW has chunks' columns only here.
        IF NEW.version_id = OLD.version_id AND NEW.ord = OLD.ord AND NEW.kind = OLD.kind
           AND NEW.hash = OLD.hash AND NEW.lane IS NOT DISTINCT FROM OLD.lane
           AND starts_with(NEW.payload, '{"rath_redacted":')
           AND NEW.payload::jsonb -> 'rath_redacted' ->> 'hash' = OLD.hash THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'rath: % on % refused: the session graph is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER redactions_append_only BEFORE UPDATE OR DELETE ON redactions
    FOR EACH ROW EXECUTE FUNCTION rath_refuse_change();
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION rath_redact(version uuid, chunk_ord integer, why text, marker text)
RETURNS TABLE (version_id uuid, ord integer, hash text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    target chunks%ROWTYPE;
    old jsonb;
    want jsonb;
BEGIN
    SELECT * INTO target FROM chunks c WHERE c.version_id = version AND c.ord = chunk_ord;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rath: redact: version % stores no chunk at ord %', version, chunk_ord
            USING ERRCODE = 'no_data_found';
    END IF;
    IF starts_with(target.payload, '{"rath_redacted":') THEN
        RAISE EXCEPTION 'rath: redact: chunk % of version % is already redacted', chunk_ord, version
            USING ERRCODE = 'unique_violation';
    END IF;
    old := target.payload::jsonb;
    want := jsonb_build_object('rath_redacted', jsonb_strip_nulls(jsonb_build_object(
        'hash', target.hash,
        'reason', why,
        'tool_call_id', CASE WHEN target.kind = 'tool_result' AND old ->> 'tool_call_id' <> '' THEN old -> 'tool_call_id' END,
        'name', CASE WHEN target.kind = 'tool_result' AND old ->> 'name' <> '' THEN old -> 'name' END,
        'tool_calls', CASE WHEN target.kind = 'assistant' AND jsonb_typeof(old -> 'tool_calls') = 'array'
                                AND jsonb_array_length(old -> 'tool_calls') > 0 THEN
            (SELECT jsonb_agg(jsonb_build_object('id', x -> 'id', 'type', x -> 'type',
                    'function', jsonb_build_object('name', x -> 'function' -> 'name', 'arguments', '{}')) ORDER BY n)
             FROM jsonb_array_elements(old -> 'tool_calls') WITH ORDINALITY AS t(x, n)) END)));
    IF NOT starts_with(marker, '{"rath_redacted":') OR marker::jsonb <> want THEN
        RAISE EXCEPTION 'rath: redact: marker % is not the redaction of chunk % of version % (want %)', marker, chunk_ord, version, want
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH done AS (
        UPDATE chunks c SET payload = marker
        WHERE c.hash = target.hash AND c.kind = target.kind AND NOT starts_with(c.payload, '{"rath_redacted":')
        RETURNING c.version_id, c.ord, c.hash
    ), rec AS (
        INSERT INTO redactions (version_id, ord, hash, reason, redacted_by)
        SELECT d.version_id, d.ord, d.hash, why, session_user FROM done d
        ON CONFLICT DO NOTHING
    )
    SELECT d.version_id, d.ord, d.hash FROM done d ORDER BY d.version_id, d.ord;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    BEGIN
        CREATE ROLE rath_redact NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO rath_redact', current_schema());
    GRANT SELECT, UPDATE ON chunks TO rath_redact;
    GRANT SELECT ON versions TO rath_redact;
    GRANT SELECT, INSERT ON redactions TO rath_redact;
    -- Owning the function needs membership for a moment; the migrating
    -- user does not keep it, so it cannot SET ROLE rath_redact afterwards.
    EXECUTE format('GRANT rath_redact TO %I', current_user);
    ALTER FUNCTION rath_redact(uuid, integer, text, text) OWNER TO rath_redact;
    EXECUTE format('REVOKE rath_redact FROM %I', current_user);
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE NOTICE 'rath: cannot set up role rath_redact (%): rath_redact() will be refused by the append-only triggers', SQLERRM;
END;
$$;
-- +goose StatementEnd

REVOKE ALL ON FUNCTION rath_redact(uuid, integer, text, text) FROM PUBLIC;
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('GRANT EXECUTE ON FUNCTION rath_redact(uuid, integer, text, text) TO %I', current_user);
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rath_redact(uuid, integer, text, text);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_user = 'rath_gc' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'rath: % on % refused: the session graph is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd
DROP TABLE redactions;
