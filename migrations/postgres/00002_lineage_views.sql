-- Lineage for users: documented views over the Session Graph (see
-- docs/lineage-sql.md), and functions that answer the same questions for one
-- version without scanning the whole graph.

-- +goose Up
-- rath_chunk_origin: every stored chunk with the version that produced it.
CREATE VIEW rath_chunk_origin AS
SELECT c.version_id, c.ord, c.kind, c.payload::jsonb AS payload, c.hash AS chunk_hash,
       v.op, v.run, v.step, v.agent, v.model, v.worker, v.trace_id, v.created_at, v.seq
FROM chunks c
JOIN versions v ON v.id = c.version_id;

-- rath_transcript_of(id): one version's full transcript, in order.
-- +goose StatementBegin
CREATE FUNCTION rath_transcript_of(target uuid)
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

-- rath_transcript: every version's full transcript (filter on version_id).
CREATE VIEW rath_transcript AS
WITH RECURSIVE chain(version_id, origin_id) AS (
    SELECT v.id, v.id FROM versions v
    UNION ALL
    SELECT chain.version_id, v.base_id
    FROM chain JOIN versions v ON v.id = chain.origin_id
    WHERE v.base_id IS NOT NULL
)
SELECT chain.version_id, c.ord, c.kind, c.payload::jsonb AS payload, c.version_id AS origin_version_id
FROM chain
JOIN chunks c ON c.version_id = chain.origin_id;

-- rath_ancestors_of(id): lineage ancestors of one version, nearest first.
-- +goose StatementBegin
CREATE FUNCTION rath_ancestors_of(target uuid, max_depth integer DEFAULT 2147483647)
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

-- rath_descendants_of(id): lineage descendants of one version, nearest first.
-- +goose StatementBegin
CREATE FUNCTION rath_descendants_of(target uuid, max_depth integer DEFAULT 2147483647)
RETURNS TABLE (version_id uuid, descendant_id uuid, depth integer)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE walk(id, depth) AS (
        SELECT l.child_id, 1 FROM lineage l WHERE l.parent_id = target AND max_depth >= 1
        UNION
        SELECT l.child_id, walk.depth + 1
        FROM walk JOIN lineage l ON l.parent_id = walk.id
        WHERE walk.depth < max_depth
    )
    SELECT target, walk.id, min(walk.depth)::integer
    FROM walk
    GROUP BY walk.id
    ORDER BY 3, (SELECT seq FROM versions WHERE id = walk.id)
$$;
-- +goose StatementEnd

-- rath_ancestors: every (version, lineage ancestor) pair with the shortest
-- distance between them (1 = a parent).
CREATE VIEW rath_ancestors AS
WITH RECURSIVE walk(version_id, ancestor_id, depth) AS (
    SELECT l.child_id, l.parent_id, 1 FROM lineage l
    UNION
    SELECT walk.version_id, l.parent_id, walk.depth + 1
    FROM walk JOIN lineage l ON l.child_id = walk.ancestor_id
)
SELECT version_id, ancestor_id, min(depth)::integer AS depth
FROM walk
GROUP BY version_id, ancestor_id;

-- rath_descendants: the same pairs seen from the ancestor.
CREATE VIEW rath_descendants AS
SELECT ancestor_id AS version_id, version_id AS descendant_id, depth
FROM rath_ancestors;

-- +goose Down
DROP VIEW rath_descendants;
DROP VIEW rath_ancestors;
DROP FUNCTION rath_descendants_of(uuid, integer);
DROP FUNCTION rath_ancestors_of(uuid, integer);
DROP VIEW rath_transcript;
DROP FUNCTION rath_transcript_of(uuid);
DROP VIEW rath_chunk_origin;
