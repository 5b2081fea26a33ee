-- Embedding vectors of memory items, cached per (namespace, model, uri):
-- text_sha is the SHA-256 of the text that was embedded, so a rewritten
-- item is embedded again; vec is dim little-endian float32s
-- (pkg/memory.EncodeVector).

-- +goose Up
CREATE TABLE memory_vectors (
    namespace  text   NOT NULL,
    model      text   NOT NULL,
    uri        text   COLLATE "C" NOT NULL,
    text_sha   text   NOT NULL,
    dim        int    NOT NULL CHECK (dim > 0),
    vec        bytea  NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (namespace, model, uri)
);

-- +goose Down
DROP TABLE memory_vectors;
