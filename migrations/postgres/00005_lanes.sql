-- Lanes: stored positions that let a transcript load, an ancestor walk and
-- a common-base lookup take one step per branch instead of one per version.
--
-- A lane is a run of versions each of which extends the one before it (the
-- previous version is both its base and its first parent). versions.lane is
-- the id of the version that started the lane and versions.pos the position
-- in it (0 for the start); chunks.lane is the lane of the version that stored
-- the chunk. (lane, pos) and (lane, ord) are unique, so the chunks of a lane
-- up to a version are one index range. A version joins its base's lane when
-- the next position is free, else starts its own (a branch).
--
-- Lanes are derived from the hashed fields and are not hashed themselves;
-- Store.Verify checks them. Versions committed before this migration each
-- start their own lane (correct, only as slow to walk as before).

-- +goose Up
ALTER TABLE versions ADD COLUMN lane uuid, ADD COLUMN pos integer NOT NULL DEFAULT 0 CHECK (pos >= 0);
ALTER TABLE chunks ADD COLUMN lane uuid;

-- The one place rows change: filling the new derived columns. The
-- append-only triggers are back on before the migration commits.
ALTER TABLE versions DISABLE TRIGGER versions_append_only;
UPDATE versions SET lane = id;
ALTER TABLE versions ENABLE TRIGGER versions_append_only;
ALTER TABLE chunks DISABLE TRIGGER chunks_append_only;
UPDATE chunks SET lane = version_id;
ALTER TABLE chunks ENABLE TRIGGER chunks_append_only;

ALTER TABLE versions ALTER COLUMN lane SET NOT NULL;
ALTER TABLE chunks ALTER COLUMN lane SET NOT NULL;
CREATE UNIQUE INDEX versions_lane_idx ON versions (lane, pos);
-- Where a walk leaves a lane: its start and its merges.
CREATE INDEX versions_junction_idx ON versions (lane, pos) WHERE pos = 0 OR parent_count > 1;
CREATE UNIQUE INDEX chunks_lane_idx ON chunks (lane, ord);

-- The per-version functions follow lanes too.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_transcript_of(target uuid)
RETURNS TABLE (version_id uuid, ord integer, kind text, payload jsonb, origin_version_id uuid)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE seg(lane, hi) AS (
        SELECT v.lane, v.len FROM versions v WHERE v.id = target
        UNION ALL
        SELECT b.lane, b.len FROM seg JOIN versions s ON s.id = seg.lane JOIN versions b ON b.id = s.base_id
    )
    SELECT target, c.ord, c.kind, c.payload::jsonb, c.version_id
    FROM seg JOIN chunks c ON c.lane = seg.lane AND c.ord < seg.hi
    ORDER BY c.ord
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_ancestors_of(target uuid, max_depth integer DEFAULT 2147483647)
RETURNS TABLE (version_id uuid, ancestor_id uuid, depth integer)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE
    start AS (SELECT v.id, v.lane, v.pos FROM versions v WHERE v.id = target),
    -- entry(lane, hi, d): the versions of lane at pos <= hi are ancestors at
    -- depth d + hi - pos (before taking the minimum over entries).
    entry(lane, hi, d) AS (
        SELECT s.lane, s.pos - 1, 1 FROM start s WHERE s.pos > 0
        UNION
        SELECT p.lane, p.pos, 1
        FROM start s JOIN lineage l ON l.child_id = s.id JOIN versions p ON p.id = l.parent_id
        WHERE s.pos = 0 OR l.ordinal > 0
        UNION
        SELECT p.lane, p.pos, e.d + e.hi - x.pos + 1
        FROM entry e
        JOIN versions x ON x.lane = e.lane AND x.pos <= e.hi AND (x.pos = 0 OR x.parent_count > 1)
        JOIN lineage l ON l.child_id = x.id AND (x.pos = 0 OR l.ordinal > 0)
        JOIN versions p ON p.id = l.parent_id
        WHERE e.d + e.hi - x.pos + 1 <= max_depth
    )
    SELECT target, x.id, min(e.d + e.hi - x.pos)::integer
    FROM entry e JOIN versions x ON x.lane = e.lane AND x.pos <= e.hi AND x.pos >= e.hi - (max_depth - e.d)
    WHERE max_depth >= 1
    GROUP BY x.id
    ORDER BY 3, x.seq DESC
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_transcript_of(target uuid)
RETURNS TABLE (version_id uuid, ord integer, kind text, payload jsonb, origin_version_id uuid)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE chain(id, base_id) AS (
        SELECT v.id, v.base_id FROM versions v WHERE v.id = target
        UNION ALL
        SELECT v.id, v.base_id FROM versions v JOIN chain ON v.id = chain.base_id
    )
    SELECT target, c.ord, c.kind, c.payload::jsonb, c.version_id
    FROM chunks c
    WHERE c.version_id IN (SELECT id FROM chain)
    ORDER BY c.ord
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION rath_ancestors_of(target uuid, max_depth integer DEFAULT 2147483647)
RETURNS TABLE (version_id uuid, ancestor_id uuid, depth integer)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE walk(id, depth) AS (
        SELECT l.parent_id, 1 FROM lineage l WHERE l.child_id = target AND max_depth >= 1
        UNION
        SELECT l.parent_id, walk.depth + 1
        FROM walk JOIN lineage l ON l.child_id = walk.id
        WHERE walk.depth < max_depth
    )
    SELECT target, walk.id, min(walk.depth)::integer
    FROM walk
    GROUP BY walk.id
    ORDER BY 3, (SELECT seq FROM versions WHERE id = walk.id) DESC
$$;
-- +goose StatementEnd
DROP INDEX chunks_lane_idx;
DROP INDEX versions_junction_idx;
DROP INDEX versions_lane_idx;
ALTER TABLE chunks DROP COLUMN lane;
ALTER TABLE versions DROP COLUMN pos, DROP COLUMN lane;
