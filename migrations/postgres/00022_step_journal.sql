-- Durable effects: the step journal. As an agent step runs, each model
-- reply (with its usage), each tool call's start and result, and each
-- round's end (with the workspace snapshot after it) are recorded here
-- before the step goes on; a redelivered step reads them and resumes
-- instead of calling the model and the tools again (pkg/agent, Journal).
--
-- kind is reply | start | result | round | resume. call_id is '' for the
-- entries that belong to a round, not a call. data is the entry's JSON.
-- Rows of committed steps are kept as evidence ("resumed after round N on
-- worker W").

-- +goose Up
CREATE TABLE step_journal (
    step_id     text        NOT NULL,
    round       integer     NOT NULL,
    call_id     text        NOT NULL DEFAULT '',
    kind        text        NOT NULL,
    worker      text        NOT NULL DEFAULT '',
    data        text        NOT NULL DEFAULT '',
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (step_id, round, call_id, kind)
);

-- +goose Down
DROP TABLE step_journal;
