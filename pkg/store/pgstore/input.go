package pgstore

import (
	"fmt"
	"time"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

// A step's input, read by the statement that starts the step (package
// runs folds these columns into its start statement): a worker that would
// otherwise read its input with a statement of its own, on a round trip
// of its own, right after the start, reads it with the start instead.
// Only an input without a base is read so, whose transcript is its own
// chunks; any other input is read as before, through the graph.

// StepInputJoin joins the input of the start statement's step row (alias
// st, column input_id) as alias iv, when it has no base, and its chunks'
// kinds and payloads in order as ic.kinds and ic.payloads (one scan).
const StepInputJoin = `LEFT JOIN versions iv ON iv.id = st.input_id AND iv.base_id IS NULL
LEFT JOIN LATERAL (SELECT array_agg(c.kind ORDER BY c.ord) AS kinds, array_agg(c.payload ORDER BY c.ord) AS payloads
	FROM chunks c WHERE c.version_id = iv.id) ic ON true`

// StepInputCols is the select list of the input StepInputJoin joins: its
// version columns, its parents, and its chunks' kinds and payloads in
// order. Every column is NULL (the parents empty) when nothing was joined.
// [InputScan] scans it.
const StepInputCols = `iv.id, iv.op, iv.len, iv.own_count, iv.placement::text, iv.prompt_tokens,
	iv.completion_tokens, iv.total_tokens, iv.run, iv.step, iv.agent, iv.model, iv.worker, iv.trace_id,
	iv.extras::text, iv.key, iv.created_at, iv.created_nanos, iv.hash,
	ARRAY(SELECT l.parent_id FROM lineage l WHERE l.child_id = iv.id ORDER BY l.ordinal),
	ic.kinds, ic.payloads`

// InputScan holds one row's StepInputCols as scanned; the zero value is
// ready for [InputScan.Dest]. It is filled by a pgx scan (the arrays need
// pgx's codecs, not database/sql's).
type InputScan struct {
	id                          *session.ID
	op, placement, extras, hash *string
	length, own                 *int
	prompt, completion, total   *int64
	created                     *time.Time
	nanos                       *int16
	kinds, payloads             [][]byte
	// f holds the columns that are pointers or slices in it too.
	f storedFields
}

// Dest returns the scan destinations of StepInputCols, in order.
func (s *InputScan) Dest() []any {
	return []any{&s.id, &s.op, &s.length, &s.own, &s.placement, &s.prompt,
		&s.completion, &s.total, &s.f.run, &s.f.step, &s.f.agent, &s.f.model, &s.f.worker, &s.f.tr,
		&s.extras, &s.f.key, &s.created, &s.nanos, &s.hash,
		&s.f.parents, &s.kinds, &s.payloads}
}

// Version returns the input the row held, with its transcript, and false
// when it held none (an input with a base, or none stored). A row that
// does not decode, or whose chunks do not add up to its length, is an
// error wrapping [session.ErrHashMismatch], as a read of it would be.
func (s *InputScan) Version() (*session.Version, []session.Chunk, bool, error) {
	if s == nil || s.id == nil {
		return nil, nil, false, nil
	}
	if s.op == nil || s.length == nil || s.own == nil || s.placement == nil || s.extras == nil ||
		s.created == nil || s.nanos == nil || s.hash == nil || s.prompt == nil || s.completion == nil || s.total == nil {
		return nil, nil, false, fmt.Errorf("%w: input %s: a NULL column", session.ErrHashMismatch, *s.id)
	}
	v := &session.Version{ID: *s.id, Op: session.Op(*s.op), Len: *s.length, Hash: *s.hash,
		Usage: session.Usage{PromptTokens: *s.prompt, CompletionTokens: *s.completion, TotalTokens: *s.total}}
	s.f.placement, s.f.extras, s.f.created, s.f.nanos = *s.placement, *s.extras, *s.created, *s.nanos
	if err := s.f.apply(v); err != nil {
		return nil, nil, false, err
	}
	if len(s.kinds) != len(s.payloads) || len(s.kinds) != *s.own || *s.own != v.Len {
		return nil, nil, false, fmt.Errorf("%w: input %s has %d chunk rows (%d payloads), want %d", session.ErrHashMismatch, v.ID, len(s.kinds), len(s.payloads), v.Len)
	}
	var arena graphrow.Arena
	chunks := make([]session.Chunk, len(s.kinds))
	for i, k := range s.kinds {
		c, err := decodeChunk(&arena, k, s.payloads[i])
		if err != nil {
			return nil, nil, false, fmt.Errorf("input %s: %w", v.ID, err)
		}
		chunks[i] = c
	}
	v.Chunks = chunks
	return v, chunks, true, nil
}

// Cached reports whether the store's cache holds version id with its
// transcript: a worker reading them would not go to the database (unless
// the redaction epoch moved since, which drops them).
func (s *Store) Cached(id session.ID) bool {
	if _, ok := s.cache.Version(id); !ok {
		return false
	}
	_, ok := s.cache.Transcript(id)
	return ok
}

// SeedInput caches a step's input as its start read it (sc), at the
// redaction epoch the same statement read: the step's own read of it
// ([Store.VersionAndTranscriptAt] at that epoch) then finds it in the
// cache. It reports whether there was an input to cache.
func (s *Store) SeedInput(sc *InputScan, epoch int64) (bool, error) {
	v, t, ok, err := sc.Version()
	if !ok || err != nil {
		return false, err
	}
	if s.cache == nil {
		return false, nil
	}
	s.cache.Sync(epoch)
	e := s.cache.Epoch()
	s.cache.AddVersion(v, e)
	s.cache.AddTranscript(v.ID, t, e)
	return true, nil
}
