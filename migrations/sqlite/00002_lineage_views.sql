-- Lineage views for the embedded store, with the same names and columns as
-- the Postgres ones (payload stays JSON text: use json_extract).

-- +goose Up
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

CREATE VIEW rath_ancestors AS
WITH RECURSIVE walk(version_id, ancestor_id, depth) AS (
    SELECT l.child_id, l.parent_id, 1 FROM lineage l
    UNION
    SELECT walk.version_id, l.parent_id, walk.depth + 1
    FROM walk JOIN lineage l ON l.child_id = walk.ancestor_id
)
SELECT version_id, ancestor_id, min(depth) AS depth
FROM walk
GROUP BY version_id, ancestor_id;

CREATE VIEW rath_descendants AS
SELECT ancestor_id AS version_id, version_id AS descendant_id, depth
FROM rath_ancestors;

-- +goose Down
DROP VIEW rath_descendants;
DROP VIEW rath_ancestors;
DROP VIEW rath_transcript;
DROP VIEW rath_chunk_origin;
