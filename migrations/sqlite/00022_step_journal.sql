-- Durable effects: the step journal. See the Postgres migration of the
-- same number for the table's meaning.

-- +goose Up
CREATE TABLE step_journal (
    step_id     TEXT      NOT NULL,
    round       INTEGER   NOT NULL,
    call_id     TEXT      NOT NULL DEFAULT '',
    kind        TEXT      NOT NULL,
    worker      TEXT      NOT NULL DEFAULT '',
    data        TEXT      NOT NULL DEFAULT '',
    recorded_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (step_id, round, call_id, kind)
);

-- +goose Down
DROP TABLE step_journal;
