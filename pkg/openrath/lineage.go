package openrath

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/rath-run/rath/internal/jsonl"
	"github.com/rath-run/rath/pkg/session"
)

// LineageRecord is one row of OpenRath's lineage export (export_jsonl):
// a session's lineage and counts, without its chunks.
type LineageRecord struct {
	ID               string
	ParentSessionIDs []string
	LineageOperator  string
	LineageKind      string
	LineageExtras    []Extra
	ChunkCount       int
	// CumulativeUsage is nil when OpenRath recorded none (null).
	CumulativeUsage *Usage
	// Rows optionally supplies the session's chunks, which the file does
	// not carry, for [ImportLineage]. ReadLineage leaves it nil and
	// WriteLineage ignores it.
	Rows []session.Chunk
}

type lineageWire struct {
	ID               *string           `json:"id"`
	ParentSessionIDs []string          `json:"parent_session_ids"`
	LineageOperator  *string           `json:"lineage_operator"`
	LineageKind      *string           `json:"lineage_kind"`
	LineageExtras    []json.RawMessage `json:"lineage_extras"`
	ChunkCount       *int              `json:"chunk_count"`
	CumulativeUsage  *Usage            `json:"cumulative_usage"`
}

// ReadLineage reads a lineage JSONL file. Parents need not be in the file
// (OpenRath's journal export leaves out unstamped sessions, so dangling
// parents are normal). Blank lines are skipped; a last line without a
// newline is read like any other. Each record needs an id; a missing
// operator or kind reads as "implicit"/"unknown", missing lists as empty and
// a missing chunk_count as 0. Errors name the line: bad JSON or UTF-8,
// ids that are not UUIDs, a negative chunk_count, lines over
// [MaxLineBytes].
func ReadLineage(r io.Reader) ([]LineageRecord, error) {
	lr := jsonl.NewReader(r, MaxLineBytes)
	var out []LineageRecord
	for {
		line, _, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		n := lr.Line()
		if errors.Is(err, jsonl.ErrLineTooLong) {
			return nil, fmt.Errorf("line %d: %w: longer than %d bytes", n, session.ErrTooLarge, MaxLineBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: read: %w", n, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !utf8.Valid(line) {
			return nil, fmt.Errorf("line %d: %w: invalid UTF-8", n, ErrFormat)
		}
		var w lineageWire
		if err := json.Unmarshal(line, &w); err != nil {
			return nil, fmt.Errorf("line %d: %w: bad JSON: %w", n, ErrFormat, err)
		}
		rec, err := w.record()
		if err != nil {
			return nil, fmt.Errorf("line %d: %w: %w", n, ErrFormat, err)
		}
		out = append(out, rec)
	}
}

func (w *lineageWire) record() (LineageRecord, error) {
	if w.ID == nil {
		return LineageRecord{}, fmt.Errorf("record has no id")
	}
	if err := checkUUID("id", *w.ID); err != nil {
		return LineageRecord{}, err
	}
	for i, p := range w.ParentSessionIDs {
		if err := checkUUID(fmt.Sprintf("parent_session_ids[%d]", i), p); err != nil {
			return LineageRecord{}, err
		}
	}
	extras, err := decodeExtras(w.LineageExtras)
	if err != nil {
		return LineageRecord{}, err
	}
	rec := LineageRecord{
		ID:               *w.ID,
		ParentSessionIDs: w.ParentSessionIDs,
		LineageOperator:  deref(w.LineageOperator, "implicit"),
		LineageKind:      deref(w.LineageKind, "unknown"),
		LineageExtras:    extras,
		CumulativeUsage:  w.CumulativeUsage,
	}
	if rec.ParentSessionIDs == nil {
		rec.ParentSessionIDs = []string{}
	}
	if w.ChunkCount != nil {
		if *w.ChunkCount < 0 {
			return LineageRecord{}, fmt.Errorf("chunk_count %d is negative", *w.ChunkCount)
		}
		rec.ChunkCount = *w.ChunkCount
	}
	return rec, nil
}

func (rec *LineageRecord) appendPy(b []byte) ([]byte, error) {
	o := newPyObject()
	o.str("id", rec.ID)
	parents := rec.ParentSessionIDs
	if parents == nil {
		parents = []string{}
	}
	o.strs("parent_session_ids", parents)
	o.str("lineage_operator", rec.LineageOperator)
	o.str("lineage_kind", rec.LineageKind)
	ex, err := appendPyExtras(nil, rec.LineageExtras)
	if err != nil {
		return nil, err
	}
	o.raw("lineage_extras", ex)
	o.int("chunk_count", int64(rec.ChunkCount))
	o.raw("cumulative_usage", rec.CumulativeUsage.appendPy(nil))
	out, err := o.bytes()
	return append(b, out...), err
}

// WriteLineage writes records as OpenRath's export_jsonl does: one object
// per line with keys id, parent_session_ids, lineage_operator, lineage_kind,
// lineage_extras, chunk_count, cumulative_usage, separators ", " and ": ",
// non-ASCII written raw, every line ending in "\n" (nothing at all for no
// records).
func WriteLineage(w io.Writer, recs []LineageRecord) error {
	var b []byte
	for i := range recs {
		var err error
		if b, err = recs[i].appendPy(b); err != nil {
			return fmt.Errorf("record %d (%s): %w", i, recs[i].ID, err)
		}
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}
