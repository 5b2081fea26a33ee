package lineage

import (
	"context"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
)

// Change is a chunk present in one transcript of a [Delta] but not at the
// same position in the other.
type Change struct {
	Ord  int          `json:"ord"`
	Kind session.Kind `json:"kind"`
	Hash string       `json:"hash"`
	Text string       `json:"text"`
}

// Delta compares the transcripts and workspaces of two versions.
type Delta struct {
	A session.ID `json:"a"`
	B session.ID `json:"b"`
	// CommonPrefix is how many leading chunks the transcripts share
	// (compared by hash).
	CommonPrefix int `json:"common_prefix"`
	// OnlyA and OnlyB are the chunks after the common prefix.
	OnlyA []Change `json:"only_a"`
	OnlyB []Change `json:"only_b"`
	// CommonAncestor is the nearest lineage ancestor of both, when any.
	CommonAncestor *session.ID `json:"common_ancestor,omitempty"`
	// SnapshotA and SnapshotB are the two workspace snapshots; when they
	// differ, `rathctl session diff A B` (GET /v1/sessions/{a}/diff?other=b)
	// lists the changed files.
	SnapshotA string `json:"snapshot_a,omitempty"`
	SnapshotB string `json:"snapshot_b,omitempty"`
	// SameWorkspace reports whether the snapshots are the same.
	SameWorkspace bool `json:"same_workspace"`
}

// Diff compares a's and b's transcripts chunk by chunk and names their
// workspace snapshots.
func Diff(ctx context.Context, src Source, a, b session.ID) (Delta, error) {
	va, err := src.Get(ctx, a)
	if err != nil {
		return Delta{}, fmt.Errorf("lineage: diff: version %s: %w", a, err)
	}
	vb, err := src.Get(ctx, b)
	if err != nil {
		return Delta{}, fmt.Errorf("lineage: diff: version %s: %w", b, err)
	}
	ta, err := src.Transcript(ctx, a)
	if err != nil {
		return Delta{}, fmt.Errorf("lineage: diff: transcript of %s: %w", a, err)
	}
	tb, err := src.Transcript(ctx, b)
	if err != nil {
		return Delta{}, fmt.Errorf("lineage: diff: transcript of %s: %w", b, err)
	}
	d := Delta{A: a, B: b, SnapshotA: va.Placement.Snapshot, SnapshotB: vb.Placement.Snapshot}
	d.SameWorkspace = d.SnapshotA == d.SnapshotB
	for d.CommonPrefix < min(len(ta), len(tb)) && ta[d.CommonPrefix].Hash() == tb[d.CommonPrefix].Hash() {
		d.CommonPrefix++
	}
	d.OnlyA = changes(ta, d.CommonPrefix)
	d.OnlyB = changes(tb, d.CommonPrefix)
	if ca, ok, err := CommonAncestor(ctx, src, a, b); err != nil {
		return Delta{}, err
	} else if ok {
		d.CommonAncestor = &ca
	}
	return d, nil
}

func changes(t []session.Chunk, from int) []Change {
	out := make([]Change, 0, len(t)-from)
	for i := from; i < len(t); i++ {
		out = append(out, Change{Ord: i, Kind: t[i].Kind(), Hash: t[i].Hash(), Text: Preview(t[i].Text(), PreviewLen)})
	}
	return out
}
