-- Lanes for the embedded store: the same stored positions as the Postgres
-- migration 00005 (see there). Ids are canonical UUID text.
--
-- Here the chunks table is rebuilt with (lane, ord) as its primary key, so a
-- lane's chunks sit together in the table's b-tree and a transcript load is
-- a sequential range scan; (version_id, ord) stays unique through an index.

-- +goose Up
ALTER TABLE versions ADD COLUMN lane TEXT NOT NULL DEFAULT '';
ALTER TABLE versions ADD COLUMN pos INTEGER NOT NULL DEFAULT 0 CHECK (pos >= 0);

-- The one place rows change: filling the new derived column, with the
-- append-only trigger recreated before the migration commits.
DROP TRIGGER versions_no_update;
UPDATE versions SET lane = id;
-- +goose StatementBegin
CREATE TRIGGER versions_no_update BEFORE UPDATE ON versions
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on versions refused: the session graph is append-only'); END;
-- +goose StatementEnd

CREATE UNIQUE INDEX versions_lane_idx ON versions (lane, pos);
CREATE INDEX versions_junction_idx ON versions (lane, pos) WHERE pos = 0 OR parent_count > 1;

-- Rebuild chunks (the views over it are dropped and recreated around it;
-- dropping a table drops its triggers before its rows, so nothing fires).
DROP VIEW rath_transcript;
DROP VIEW rath_chunk_origin;
CREATE TABLE chunks_lanes (
    version_id TEXT    NOT NULL REFERENCES versions (id),
    lane       TEXT    NOT NULL,
    ord        INTEGER NOT NULL CHECK (ord >= 0),
    kind       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    hash       TEXT    NOT NULL CHECK (length(hash) = 64),
    PRIMARY KEY (lane, ord)
) WITHOUT ROWID;
INSERT INTO chunks_lanes (version_id, lane, ord, kind, payload, hash)
SELECT version_id, version_id, ord, kind, payload, hash FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_lanes RENAME TO chunks;
CREATE UNIQUE INDEX chunks_version_idx ON chunks (version_id, ord);
-- +goose StatementBegin
CREATE TRIGGER chunks_no_update BEFORE UPDATE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER chunks_no_delete BEFORE DELETE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd

CREATE VIEW rath_chunk_origin AS
SELECT c.version_id, c.ord, c.kind, c.payload, c.hash AS chunk_hash,
       v.op, v.run, v.step, v.agent, v.model, v.worker, v.trace_id, v.created_at, v.seq
FROM chunks c
JOIN versions v ON v.id = c.version_id;

CREATE VIEW rath_transcript AS
WITH RECURSIVE chain(version_id, origin_id) AS (
    SELECT v.id, v.id FROM versions v
    UNION ALL
    SELECT chain.version_id, v.base_id
    FROM chain JOIN versions v ON v.id = chain.origin_id
    WHERE v.base_id IS NOT NULL
)
SELECT chain.version_id, c.ord, c.kind, c.payload, c.version_id AS origin_version_id
FROM chain
JOIN chunks c ON c.version_id = chain.origin_id;

-- +goose Down
DROP VIEW rath_transcript;
DROP VIEW rath_chunk_origin;
CREATE TABLE chunks_versions (
    version_id TEXT    NOT NULL REFERENCES versions (id),
    ord        INTEGER NOT NULL CHECK (ord >= 0),
    kind       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    hash       TEXT    NOT NULL CHECK (length(hash) = 64),
    PRIMARY KEY (version_id, ord)
) WITHOUT ROWID;
INSERT INTO chunks_versions (version_id, ord, kind, payload, hash)
SELECT version_id, ord, kind, payload, hash FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_versions RENAME TO chunks;
-- +goose StatementBegin
CREATE TRIGGER chunks_no_update BEFORE UPDATE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: UPDATE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER chunks_no_delete BEFORE DELETE ON chunks
BEGIN SELECT RAISE(ABORT, 'rath: DELETE on chunks refused: the session graph is append-only'); END;
-- +goose StatementEnd
CREATE VIEW rath_chunk_origin AS
SELECT c.version_id, c.ord, c.kind, c.payload, c.hash AS chunk_hash,
       v.op, v.run, v.step, v.agent, v.model, v.worker, v.trace_id, v.created_at, v.seq
FROM chunks c
JOIN versions v ON v.id = c.version_id;
CREATE VIEW rath_transcript AS
WITH RECURSIVE chain(version_id, origin_id) AS (
    SELECT v.id, v.id FROM versions v
    UNION ALL
    SELECT chain.version_id, v.base_id
    FROM chain JOIN versions v ON v.id = chain.origin_id
    WHERE v.base_id IS NOT NULL
)
SELECT chain.version_id, c.ord, c.kind, c.payload, c.version_id AS origin_version_id
FROM chain
JOIN chunks c ON c.version_id = chain.origin_id;
DROP INDEX versions_junction_idx;
DROP INDEX versions_lane_idx;
ALTER TABLE versions DROP COLUMN pos;
ALTER TABLE versions DROP COLUMN lane;
