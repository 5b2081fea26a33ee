-- Embedding vectors of memory items, cached per (namespace, model, uri):
-- text_sha is the SHA-256 of the text that was embedded, so a rewritten
-- item is embedded again; vec is dim little-endian float32s
-- (pkg/memory.EncodeVector).

-- +goose Up
CREATE TABLE memory_vectors (
    namespace  TEXT    NOT NULL,
    model      TEXT    NOT NULL,
    uri        TEXT    NOT NULL,
    text_sha   TEXT    NOT NULL,
    dim        INTEGER NOT NULL CHECK (dim > 0),
    vec        BLOB    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, model, uri)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE memory_vectors;
