-- Two tenant-isolation fixes (issue #19, findings 8 and 12).
--
-- 1. A placement names a workspace snapshot only through the caller's own
-- versions. A snapshot id is the sha256 of its manifest, so anyone can
-- learn or compute one; it must not work as a bearer capability. On a
-- tenant connection (rath_tenant() set: the coordinator's tenant pools,
-- i.e. everything a tenant sends through the API: POST /v1/versions,
-- session import, fork, append) a new version may name a snapshot only if a
-- version of the same tenant already holds it. Otherwise the INSERT fails
-- with SQLSTATE 23503 and a message naming placement.snapshot that reads as
-- not found, whether or not another tenant holds the id. System
-- connections (workers committing a step's fresh snapshot, rathctl with
-- store access) are not bound: they are the operator's.
--
-- 2. Redaction markers are recorded exactly. A marker states the chunk's
-- hash, the reason and, for tool calls and results, their ids and names;
-- only the hash is covered by the version hashes. redaction_markers keeps
-- the exact marker bytes rath_redact wrote, and the stores' Verify reports
-- a marker whose bytes are not recorded for its hash: a marker edited past
-- the triggers (its reason, tool names or call ids) no longer verifies.
-- The recording is an AFTER UPDATE trigger on chunks that acts only as
-- rath_redact (inside the SECURITY DEFINER function), and refuses a marker
-- that does not state the original content's tool call ids and names or
-- that overwrites a marker, so even a member of rath_redact writing by hand
-- cannot record a false one. Markers written before this migration are
-- recorded as they stand now (they were written by 00014's rath_redact,
-- which checks the same).

-- +goose Up
CREATE INDEX versions_snapshot_idx ON versions (tenant, (placement->>'snapshot'))
    WHERE placement->>'snapshot' IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION rath_version_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    snap text := nullif(NEW.placement->>'snapshot', '');
BEGIN
    IF snap IS NULL OR rath_tenant() IS NULL THEN
        RETURN NEW;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM versions v WHERE v.tenant = rath_tenant() AND v.placement->>'snapshot' = snap) THEN
        RAISE EXCEPTION 'placement.snapshot: workspace snapshot % not found (a placement may name only a snapshot that one of your versions holds)', snap
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER versions_snapshot BEFORE INSERT ON versions
    FOR EACH ROW WHEN (NEW.placement->>'snapshot' IS NOT NULL) EXECUTE FUNCTION rath_version_snapshot();

CREATE TABLE redaction_markers (
    hash        text        NOT NULL CHECK (length(hash) = 64),
    marker      text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX redaction_markers_hash_idx ON redaction_markers (hash);

-- +goose StatementBegin
CREATE TRIGGER redaction_markers_append_only BEFORE UPDATE OR DELETE ON redaction_markers
    FOR EACH ROW EXECUTE FUNCTION rath_refuse_change();
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION rath_record_marker() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    src jsonb;
    want jsonb;
BEGIN
    -- Only rath_redact (current_user inside the SECURITY DEFINER function)
    -- records a marker; an UPDATE by anyone else past the append-only
    -- trigger records nothing, so Verify reports it.
    IF current_user <> 'rath_redact' THEN
        RETURN NULL;
    END IF;
    -- Even as rath_redact, a marker is written once, over the original
    -- content, and states exactly the tool call ids and names of that
    -- content (what rath_redact checks for the row it was given, here for
    -- every row it writes).
    IF starts_with(OLD.payload, '{"rath_redacted":') THEN
        RAISE EXCEPTION 'rath: chunk % of version % is already redacted: a marker is never rewritten', OLD.ord, OLD.version_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    src := OLD.payload::jsonb;
    want := jsonb_build_object('rath_redacted', jsonb_strip_nulls(jsonb_build_object(
        'hash', OLD.hash,
        'reason', NEW.payload::jsonb -> 'rath_redacted' -> 'reason',
        'tool_call_id', CASE WHEN OLD.kind = 'tool_result' AND src ->> 'tool_call_id' <> '' THEN src -> 'tool_call_id' END,
        'name', CASE WHEN OLD.kind = 'tool_result' AND src ->> 'name' <> '' THEN src -> 'name' END,
        'tool_calls', CASE WHEN OLD.kind = 'assistant' AND jsonb_typeof(src -> 'tool_calls') = 'array'
                                AND jsonb_array_length(src -> 'tool_calls') > 0 THEN
            (SELECT jsonb_agg(jsonb_build_object('id', x -> 'id', 'type', x -> 'type',
                    'function', jsonb_build_object('name', x -> 'function' -> 'name', 'arguments', '{}')) ORDER BY n)
             FROM jsonb_array_elements(src -> 'tool_calls') WITH ORDINALITY AS t(x, n)) END)));
    IF NEW.payload::jsonb <> want THEN
        RAISE EXCEPTION 'rath: marker of chunk % of version % does not state that chunk''s tool call ids and names', OLD.ord, OLD.version_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM redaction_markers m WHERE m.hash = NEW.hash AND m.marker = NEW.payload) THEN
        INSERT INTO redaction_markers (hash, marker) VALUES (NEW.hash, NEW.payload);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER chunks_record_marker AFTER UPDATE OF payload ON chunks
    FOR EACH ROW WHEN (starts_with(NEW.payload, '{"rath_redacted":') AND OLD.payload IS DISTINCT FROM NEW.payload)
    EXECUTE FUNCTION rath_record_marker();

INSERT INTO redaction_markers (hash, marker)
SELECT DISTINCT c.hash, c.payload FROM chunks c
WHERE starts_with(c.payload, '{"rath_redacted":')
  AND EXISTS (SELECT 1 FROM redactions r WHERE r.hash = c.hash);

-- +goose StatementBegin
DO $$
BEGIN
    GRANT SELECT, INSERT ON redaction_markers TO rath_redact;
EXCEPTION WHEN undefined_object THEN
    RAISE NOTICE 'rath: no role rath_redact (see 00014): redactions are refused, so no marker is recorded';
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER chunks_record_marker ON chunks;
DROP FUNCTION rath_record_marker();
DROP TABLE redaction_markers;
DROP TRIGGER versions_snapshot ON versions;
DROP FUNCTION rath_version_snapshot();
DROP INDEX versions_snapshot_idx;
