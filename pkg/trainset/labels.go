package trainset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/rath-run/rath/pkg/session"
)

// Label is a judgement recorded on a trajectory's end: a score, a
// preference, or both. It is stored as a note chunk {"rath_label": Label}
// appended to the labeled version ([LabelChunk]), so a label is part of
// the hash chain, scoped to the version's tenant, exported and imported
// with its session, and needs no table of its own.
type Label struct {
	Score  *float64 `json:"score,omitempty"`
	Prefer bool     `json:"prefer,omitempty"`
	// By names who or what labeled (a person, a verifier command).
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

type labelBody struct {
	Label Label `json:"rath_label"`
}

// LabelChunk returns the note chunk that records l.
func LabelChunk(l Label) (session.Chunk, error) {
	if l.Score == nil && !l.Prefer {
		return session.Chunk{}, errors.New("label: give a score or a preference")
	}
	if l.Score != nil && (math.IsNaN(*l.Score) || math.IsInf(*l.Score, 0)) {
		return session.Chunk{}, fmt.Errorf("label: score %v is not a finite number", *l.Score)
	}
	return session.Evidence(session.KindNote, labelBody{Label: l})
}

// LabelOf returns the label a chunk records, if it is a label chunk.
func LabelOf(c session.Chunk) (Label, bool) {
	if c.Kind() != session.KindNote || c.Redacted() {
		return Label{}, false
	}
	p := c.Payload()
	if !bytes.Contains(p, []byte(`"rath_label"`)) {
		return Label{}, false
	}
	var b labelBody
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if dec.Decode(&b) != nil || (b.Label.Score == nil && !b.Label.Prefer) {
		return Label{}, false
	}
	return b.Label, true
}

// labelsOnly reports whether chunks are all label chunks (and there is at
// least one): such a version labels its base and is no trajectory itself.
func labelsOnly(chunks []session.Chunk) bool {
	for _, c := range chunks {
		if _, ok := LabelOf(c); !ok {
			return false
		}
	}
	return len(chunks) > 0
}

// isLabelVersion reports whether version id only records labels.
func isLabelVersion(ctx context.Context, src Source, id session.ID, ownChunks int) (bool, error) {
	if ownChunks == 0 {
		return false, nil
	}
	v, err := src.Get(ctx, id)
	if err != nil {
		return false, fmt.Errorf("export: get %s: %w", id, err)
	}
	return labelsOnly(v.Chunks), nil
}
