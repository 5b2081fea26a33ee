-- The Session Graph: versions, the chunks they append, and lineage edges.
-- Rows are append-only: triggers refuse UPDATE, DELETE and TRUNCATE.

-- +goose Up
CREATE TABLE versions (
    id                uuid        PRIMARY KEY,
    -- seq orders versions by commit; parents always have a smaller seq.
    seq               bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    -- base_id: the version whose transcript this one extends (NULL: none).
    base_id           uuid        REFERENCES versions (id),
    op                text        NOT NULL CHECK (op IN ('create', 'append', 'step', 'fork', 'detach', 'merge',
                                                         'compress', 'replay', 'import', 'redact', 'place')),
    -- len: length of the full transcript; own_count: chunks stored here.
    len               integer     NOT NULL CHECK (len >= 0),
    own_count         integer     NOT NULL CHECK (own_count >= 0 AND own_count <= len),
    parent_count      integer     NOT NULL CHECK (parent_count >= 0),
    placement         jsonb       NOT NULL DEFAULT '{}',
    prompt_tokens     bigint      NOT NULL DEFAULT 0,
    completion_tokens bigint      NOT NULL DEFAULT 0,
    total_tokens      bigint      NOT NULL DEFAULT 0,
    run               text,
    step              text,
    agent             text,
    model             text,
    worker            text,
    trace_id          text,
    -- extras: lineage annotations, kept as exact JSON text so hashes recompute.
    extras            json        NOT NULL DEFAULT '[]',
    -- key makes a commit idempotent (a step id); NULL when none.
    key               text        UNIQUE,
    created_at        timestamptz NOT NULL,
    -- created_nanos: the sub-microsecond part of the creation time.
    created_nanos     smallint    NOT NULL DEFAULT 0 CHECK (created_nanos BETWEEN 0 AND 999),
    hash              text        NOT NULL CHECK (length(hash) = 64)
);

CREATE INDEX versions_base_idx ON versions (base_id) WHERE base_id IS NOT NULL;
CREATE INDEX versions_roots_idx ON versions (seq) WHERE parent_count = 0;
CREATE INDEX versions_run_idx ON versions (run, seq) WHERE run IS NOT NULL;

CREATE TABLE chunks (
    version_id uuid    NOT NULL REFERENCES versions (id),
    -- ord: position in the full transcript (the base's len + index).
    ord        integer NOT NULL CHECK (ord >= 0),
    kind       text    NOT NULL,
    -- payload: the exact canonical JSON bytes, so hashes recompute.
    payload    text    NOT NULL,
    hash       text    NOT NULL CHECK (length(hash) = 64),
    PRIMARY KEY (version_id, ord)
);

CREATE TABLE lineage (
    child_id  uuid     NOT NULL REFERENCES versions (id),
    parent_id uuid     NOT NULL REFERENCES versions (id),
    -- ordinal: the parent's position in the child's parent list (0 = first).
    ordinal   smallint NOT NULL CHECK (ordinal >= 0),
    op        text     NOT NULL,
    PRIMARY KEY (child_id, ordinal),
    UNIQUE (child_id, parent_id)
);

CREATE INDEX lineage_parent_idx ON lineage (parent_id, child_id);

-- +goose StatementBegin
CREATE FUNCTION rath_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A future redaction migration replaces this function to let a recorded
    -- redaction through; nothing else may change graph rows.
    RAISE EXCEPTION 'rath: % on % refused: the session graph is append-only', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER versions_append_only BEFORE UPDATE OR DELETE ON versions
    FOR EACH ROW EXECUTE FUNCTION rath_refuse_change();
CREATE TRIGGER versions_no_truncate BEFORE TRUNCATE ON versions
    FOR EACH STATEMENT EXECUTE FUNCTION rath_refuse_change();
CREATE TRIGGER chunks_append_only BEFORE UPDATE OR DELETE ON chunks
    FOR EACH ROW EXECUTE FUNCTION rath_refuse_change();
CREATE TRIGGER chunks_no_truncate BEFORE TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION rath_refuse_change();
CREATE TRIGGER lineage_append_only BEFORE UPDATE OR DELETE ON lineage
    FOR EACH ROW EXECUTE FUNCTION rath_refuse_change();
CREATE TRIGGER lineage_no_truncate BEFORE TRUNCATE ON lineage
    FOR EACH STATEMENT EXECUTE FUNCTION rath_refuse_change();

-- +goose Down
DROP TABLE lineage;
DROP TABLE chunks;
DROP TABLE versions;
DROP FUNCTION rath_refuse_change();
