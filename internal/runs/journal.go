package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// JournalEntry is one record of a step's journal (table step_journal): a
// model reply, a tool call's start or result, a round's end, or a resume.
// Package agent defines what each kind's Data holds (agent.JournalEntry);
// the store keeps it as opaque JSON.
type JournalEntry struct {
	Round  int
	CallID string
	Kind   string
	Worker string
	Data   []byte
	At     time.Time
}

// maxJournalData bounds one entry's data: a model reply or a tool result
// (both already bounded upstream) with room to spare.
const maxJournalData = 16 << 20

// AppendJournal records es for step stepID durably, in one transaction
// with a synchronous commit: the step goes on only once its progress
// would survive a crash. An entry recorded again under the same (round,
// call id, kind) replaces the old one: a resumed step that runs a call
// again records what it got.
//
// On Postgres, concurrent appends are grouped like the graph store's
// commits: with none in flight an append goes alone at once; appends
// arriving while one is in flight go together as the next statement, one
// transaction and one WAL flush for the group. A group refused (a row a
// policy refuses, two writes of one entry) wrote nothing and each of its
// appends is retried alone, so each caller gets its own answer.
func (s *Store) AppendJournal(ctx context.Context, stepID string, es ...JournalEntry) error {
	if len(es) == 0 {
		return nil
	}
	for _, e := range es {
		if len(e.Data) > maxJournalData {
			return fmt.Errorf("journal of step %s: entry %s (round %d, call %q) has %d bytes of data, over the limit of %d",
				stepID, e.Kind, e.Round, e.CallID, len(e.Data), maxJournalData)
		}
	}
	a := &journalAppend{stepID: stepID, es: es, now: s.ts()}
	var err error
	if s.relaxed && s.journal != nil {
		err = s.journal.do(ctx, a)
	} else {
		err = s.insertJournal(ctx, a)
	}
	if err != nil {
		last := es[len(es)-1]
		return fmt.Errorf("journal of step %s: record %s (round %d, call %q): %w", stepID, last.Kind, last.Round, last.CallID, err)
	}
	return nil
}

// journalAppend is one AppendJournal call's rows.
type journalAppend struct {
	stepID string
	es     []JournalEntry
	now    time.Time
}

// insertJournal writes the appends' rows in one statement.
func (s *Store) insertJournal(ctx context.Context, as ...*journalAppend) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO step_journal (step_id, round, call_id, kind, worker, data, recorded_at) VALUES `)
	args := make([]any, 0, 7*len(as))
	for _, a := range as {
		for _, e := range a.es {
			if len(args) > 0 {
				q.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7)
			args = append(args, a.stepID, e.Round, e.CallID, e.Kind, e.Worker, string(e.Data), a.now)
		}
	}
	q.WriteString(` ON CONFLICT (step_id, round, call_id, kind) DO UPDATE
		 SET worker = excluded.worker, data = excluded.data, recorded_at = excluded.recorded_at`)
	_, err := s.db.ExecContext(ctx, q.String(), args...)
	return err
}

// maxJournalGroup bounds a group, in appends (Postgres allows 65,535
// parameters a statement; an append is a few rows of 7).
const maxJournalGroup = 256

// LoadJournal returns step stepID's journal in the order it was recorded
// (by time, then round).
func (s *Store) LoadJournal(ctx context.Context, stepID string) ([]JournalEntry, error) {
	return queryAll(ctx, s.db, "step journal", func(sc scanner) (JournalEntry, error) {
		var e JournalEntry
		var data string
		if err := sc.Scan(&e.Round, &e.CallID, &e.Kind, &e.Worker, &data, &e.At); err != nil {
			return e, err
		}
		e.Data = []byte(data)
		e.At = e.At.UTC()
		return e, nil
	}, `SELECT round, call_id, kind, worker, data, recorded_at FROM step_journal WHERE step_id = $1
	    ORDER BY round, recorded_at, call_id, kind`, stepID)
}

// pruneJournal deletes the payload entries (model replies, tool call
// starts and results) of step stepID as it commits, in the commit's
// transaction: its version holds them, and copies kept beside the graph
// would outlive a redaction of it. The round and resume entries stay as
// evidence (the dossier's "resumed after round N on worker W"), and so do
// the ambiguous and review entries, without their text: the call's
// arguments, a skip's result and a review's reason are in the version (the
// assistant chunk, the review chunk and the tool result), where a
// redaction reaches them. What stays (call id, tool, round, worker,
// decision, who decided) is evidence only: a committed step never runs
// its loop again.
func pruneJournal(ctx context.Context, tx execQueryer, stepID string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM step_journal WHERE step_id = $1 AND kind IN ('reply', 'start', 'result')`, stepID); err != nil {
		return fmt.Errorf("commit step %s: prune its journal: %w", stepID, err)
	}
	type entry struct {
		round        int
		callID, kind string
		data         string
	}
	es, err := queryAll(ctx, tx, "the review entries of step "+stepID, func(sc scanner) (entry, error) {
		var e entry
		err := sc.Scan(&e.round, &e.callID, &e.kind, &e.data)
		return e, err
	}, `SELECT round, call_id, kind, data FROM step_journal WHERE step_id = $1 AND kind IN ('ambiguous', 'review')`, stepID)
	if err != nil {
		return fmt.Errorf("commit step %s: %w", stepID, err)
	}
	for _, e := range es {
		d, err := stripText(e.data)
		if err != nil {
			return fmt.Errorf("commit step %s: journal entry %s (round %d, call %q): %w", stepID, e.kind, e.round, e.callID, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE step_journal SET data = $5 WHERE step_id = $1 AND round = $2 AND call_id = $3 AND kind = $4`,
			stepID, e.round, e.callID, e.kind, d); err != nil {
			return fmt.Errorf("commit step %s: prune journal entry %s (round %d, call %q): %w", stepID, e.kind, e.round, e.callID, err)
		}
	}
	return nil
}

// strippedKeys are the fields of ambiguous and review entries
// (agent.AmbiguousError, agent.Review) that copy transcript text.
var strippedKeys = []string{"arguments", "result", "reason"}

// stripText returns data, a JSON object, without strippedKeys.
func stripText(data string) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return "", fmt.Errorf("data: %w", err)
	}
	for _, k := range strippedKeys {
		delete(m, k)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
