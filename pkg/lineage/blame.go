package lineage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rath-run/rath/pkg/session"
)

// Entry says who produced one chunk of a transcript.
type Entry struct {
	// Ord is the chunk's position in the blamed transcript.
	Ord       int          `json:"ord"`
	Kind      session.Kind `json:"kind"`
	ChunkHash string       `json:"chunk_hash"`
	// Version is the version that first stored the chunk; Op and the
	// producer fields are that version's.
	Version session.ID `json:"version"`
	Op      session.Op `json:"op"`
	Run     string     `json:"run,omitempty"`
	Step    string     `json:"step,omitempty"`
	Agent   string     `json:"agent,omitempty"`
	Model   string     `json:"model,omitempty"`
	Worker  string     `json:"worker,omitempty"`
	TraceID string     `json:"trace_id,omitempty"`
	// Tool and CallID name the tool call of a tool_result chunk; for an
	// assistant chunk Tool lists the tools it called (comma-separated).
	Tool   string `json:"tool,omitempty"`
	CallID string `json:"call_id,omitempty"`
	// Backend and Snapshot are the producing version's placement: where
	// its tools ran and the workspace snapshot it recorded.
	Backend  string `json:"backend,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
	// Via lists the merges that carried the chunk from its producer into
	// the blamed transcript, outermost first.
	Via []session.ID `json:"via,omitempty"`
	// Text is a short preview of the chunk.
	Text string `json:"text"`
}

// PreviewLen bounds Entry.Text.
const PreviewLen = 120

// Blame returns one Entry per chunk of id's transcript, in order.
func Blame(ctx context.Context, src Source, id session.ID) ([]Entry, error) {
	v, err := src.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("lineage: blame %s: %w", id, err)
	}
	out := make([]Entry, v.Len)
	b := blamer{src: src, out: out}
	if err := b.blame(ctx, v, 0, v.Len, 0, nil); err != nil {
		return nil, err
	}
	return out, nil
}

type blamer struct {
	src Source
	out []Entry
}

// blame fills out[shift+i] for positions i in [from, to) of v's transcript,
// via the merges in via.
func (b *blamer) blame(ctx context.Context, v *session.Version, from, to, shift int, via []session.ID) error {
	for from < to {
		start := v.Len - len(v.Chunks)
		if hi := min(to, v.Len); hi > max(from, start) {
			lo := max(from, start)
			if err := b.own(ctx, v, lo, hi, shift, via); err != nil {
				return err
			}
			to = lo
		}
		if from >= to {
			return nil
		}
		if v.Base == nil {
			return fmt.Errorf("lineage: version %s has no base but positions %d..%d are below its own chunks", v.ID, from, to)
		}
		base, err := b.src.Get(ctx, *v.Base)
		if err != nil {
			return fmt.Errorf("lineage: version %s: base %s: %w", v.ID, *v.Base, err)
		}
		v = base
	}
	return nil
}

// own attributes v's own chunks at positions [lo, hi). A merge's own
// chunks are chunks of the other parent's transcript (its last ones, or
// those the first parent lacked): they are attributed where that parent's
// transcript got them.
func (b *blamer) own(ctx context.Context, v *session.Version, lo, hi, shift int, via []session.ID) error {
	start := v.Len - len(v.Chunks)
	if v.Op == session.OpMerge && len(v.Parents) == 2 {
		other, err := b.src.Get(ctx, v.Parents[1])
		if err != nil {
			return fmt.Errorf("lineage: merge %s: parent %s: %w", v.ID, v.Parents[1], err)
		}
		// The merged chunks are other's last len(v.Chunks) chunks.
		otherStart := other.Len - len(v.Chunks)
		if otherStart >= 0 && len(via) < 64 {
			tr, err := b.src.Transcript(ctx, other.ID)
			if err != nil {
				return fmt.Errorf("lineage: merge %s: parent %s: %w", v.ID, other.ID, err)
			}
			same := true
			for i := lo; i < hi; i++ {
				if tr[otherStart+i-start].Hash() != v.Chunks[i-start].Hash() {
					same = false
					break
				}
			}
			if same {
				delta := (otherStart - start)
				return b.blame(ctx, other, lo+delta, hi+delta, shift-delta, append(via[:len(via):len(via)], v.ID))
			}
		}
	}
	if v.Op == session.OpMerge && len(v.Parents) == 2 && len(via) < 64 {
		// A merge that took only the chunks its first parent lacked: each
		// one is where its origin is in the other parent's transcript.
		pos, err := mergedPositions(ctx, b.src, v)
		if err != nil {
			return err
		}
		if pos != nil {
			other, err := b.src.Get(ctx, v.Parents[1])
			if err != nil {
				return fmt.Errorf("lineage: merge %s: parent %s: %w", v.ID, v.Parents[1], err)
			}
			through := append(slices.Clip(via), v.ID)
			for i := lo; i < hi; i++ {
				p := pos[i-start]
				if err := b.blame(ctx, other, p, p+1, shift+i-p, through); err != nil {
					return err
				}
			}
			return nil
		}
	}
	for i := lo; i < hi; i++ {
		b.out[shift+i] = entryOf(v, v.Chunks[i-start], shift+i, via)
	}
	return nil
}

// mergedPositions returns, for each of merge v's own chunks, its position
// in the transcript of v's other parent (found by origin,
// [session.Origins]), or nil when one is not there.
func mergedPositions(ctx context.Context, src Source, v *session.Version) ([]int, error) {
	mine, err := session.Origins(ctx, src, v.ID)
	if err != nil {
		return nil, fmt.Errorf("lineage: merge %s: %w", v.ID, err)
	}
	theirs, err := session.Origins(ctx, src, v.Parents[1])
	if err != nil {
		return nil, fmt.Errorf("lineage: merge %s: %w", v.ID, err)
	}
	at := make(map[session.Origin]int, len(theirs))
	for i, o := range theirs {
		if _, ok := at[o]; !ok {
			at[o] = i
		}
	}
	own := mine[len(mine)-len(v.Chunks):]
	out := make([]int, len(own))
	for i, o := range own {
		p, ok := at[o]
		if !ok {
			return nil, nil
		}
		out[i] = p
	}
	return out, nil
}

func entryOf(v *session.Version, c session.Chunk, ord int, via []session.ID) Entry {
	e := Entry{
		Ord: ord, Kind: c.Kind(), ChunkHash: c.Hash(), Version: v.ID, Op: v.Op,
		Run: v.Producer.Run, Step: v.Producer.Step, Agent: v.Producer.Agent, Model: v.Producer.Model,
		Worker: v.Producer.Worker, TraceID: v.Producer.TraceID,
		Backend: v.Placement.Backend, Snapshot: v.Placement.Snapshot, Via: via,
		Text: Preview(c.Text(), PreviewLen),
	}
	if r, ok := c.ToolResult(); ok {
		e.Tool, e.CallID = r.Name, r.ToolCallID
	}
	if calls := c.ToolCalls(); len(calls) > 0 {
		names := make([]string, len(calls))
		for i, tc := range calls {
			names[i] = tc.Function.Name
		}
		e.Tool = strings.Join(names, ",")
	}
	return e
}

// Preview returns s on one line, cut to at most n runes with "…".
func Preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}
