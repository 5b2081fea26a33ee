package lineage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Node statuses.
const (
	// StatusOutput is the run's output (or the version asked about).
	StatusOutput = "output"
	// StatusOK is a version the output descends from, or any version when
	// no output is known.
	StatusOK = "ok"
	// StatusHead is a version nothing in the graph descends from, when no
	// output is known.
	StatusHead = "head"
	// StatusRejected is a version neither the output nor any later merge
	// reaches: a branch that was not taken.
	StatusRejected = "rejected"
	// StatusFailed is the input of a step that failed.
	StatusFailed = "failed"
	// StatusContext is a version outside the run, shown because a run's
	// version descends from it.
	StatusContext = "context"
)

// EdgeDetach is the edge kind that links a detached root to the version
// whose rows it shares (not a lineage parent); other edges are named for
// the child's op.
const EdgeDetach = "detach"

// Node is one version in a [Graph].
type Node struct {
	ID    session.ID `json:"id"`
	Op    session.Op `json:"op"`
	Run   string     `json:"run,omitempty"`
	Step  string     `json:"step,omitempty"`
	Agent string     `json:"agent,omitempty"`
	Model string     `json:"model,omitempty"`
	// Chunks is how many chunks the version stores; Len its transcript's.
	Chunks int `json:"chunks"`
	Len    int `json:"len"`
	// Tokens is the cumulative token total; OwnTokens what the version
	// added to its base's (a step's model calls).
	Tokens    int64  `json:"tokens"`
	OwnTokens int64  `json:"own_tokens"`
	Status    string `json:"status"`
	// Labels name the evidence the version stored (memory_recall,
	// selector_decision and its choice, approval, note, summary) and the
	// tools it called.
	Labels    []string  `json:"labels,omitempty"`
	Snapshot  string    `json:"snapshot,omitempty"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
}

// Edge is one link of a [Graph], from a parent to its child.
type Edge struct {
	From session.ID `json:"from"`
	To   session.ID `json:"to"`
	// Kind is the child's op (fork, merge, compress, step, append, …) or
	// EdgeDetach.
	Kind string `json:"kind"`
	// Ordinal is the parent's position among the child's parents.
	Ordinal int `json:"ordinal"`
}

// Graph is a picture-ready piece of the Session Graph: versions and their
// links, each version with a status. Nodes are in creation order.
type Graph struct {
	Title  string      `json:"title"`
	Run    string      `json:"run,omitempty"`
	Output *session.ID `json:"output,omitempty"`
	Nodes  []Node      `json:"nodes"`
	Edges  []Edge      `json:"edges"`

	// versions holds the loaded versions, for exports that need more than
	// the nodes (OpenRath's lineage JSONL).
	versions map[session.ID]*session.Version
}

// MaxNodes bounds a Graph, so a request cannot load an unbounded graph.
const MaxNodes = 20_000

// RunInfo is what a graph of a run needs to know about it besides the
// versions: its input, its output (nil until it succeeded) and the inputs
// of its failed steps.
type RunInfo struct {
	ID           string       `json:"id"`
	Input        *session.ID  `json:"input,omitempty"`
	Output       *session.ID  `json:"output,omitempty"`
	FailedInputs []session.ID `json:"failed_inputs,omitempty"`
}

// ForRoot returns the graph of root and every version descending from it.
// output, when not nil, marks the version whose route the picture shows.
func ForRoot(ctx context.Context, src Source, root session.ID, output *session.ID) (*Graph, error) {
	rel, err := src.Descendants(ctx, root, 0)
	if err != nil {
		return nil, fmt.Errorf("lineage: descendants of %s: %w", root, err)
	}
	ids := []session.ID{root}
	for _, r := range rel {
		ids = append(ids, r.ID)
	}
	g, err := build(ctx, src, ids)
	if err != nil {
		return nil, err
	}
	g.Title = "session " + root.String()
	g.mark(output, nil)
	return g, nil
}

// Around returns the graph of id's ancestors and descendants up to depth
// edges away (depth <= 0: all), with id marked as the output.
func Around(ctx context.Context, src Source, id session.ID, depth int) (*Graph, error) {
	up, err := src.Ancestors(ctx, id, depth)
	if err != nil {
		return nil, fmt.Errorf("lineage: ancestors of %s: %w", id, err)
	}
	down, err := src.Descendants(ctx, id, depth)
	if err != nil {
		return nil, fmt.Errorf("lineage: descendants of %s: %w", id, err)
	}
	ids := []session.ID{id}
	for _, r := range append(up, down...) {
		ids = append(ids, r.ID)
	}
	g, err := build(ctx, src, ids)
	if err != nil {
		return nil, err
	}
	g.Title = "version " + id.String()
	g.mark(&id, nil)
	return g, nil
}

// ForRun returns the graph of a run: every version its steps and driver
// made (producer run = run.ID), their parents outside the run (status
// context), and the run's input.
func ForRun(ctx context.Context, src Source, run RunInfo) (*Graph, error) {
	if run.ID == "" {
		return nil, fmt.Errorf("lineage: graph of a run: empty run id")
	}
	var ids []session.ID
	inRun := make(map[session.ID]bool)
	p := store.ListParams{Run: run.ID, Limit: store.MaxListLimit}
	for {
		page, err := src.List(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("lineage: versions of run %s: %w", run.ID, err)
		}
		for _, in := range page.Versions {
			ids = append(ids, in.ID)
			inRun[in.ID] = true
			if len(ids) > MaxNodes {
				return nil, fmt.Errorf("lineage: run %s: %w: more than %d versions", run.ID, session.ErrTooLarge, MaxNodes)
			}
		}
		if page.Next == "" {
			break
		}
		p.After = page.Next
	}
	if run.Output != nil {
		ids = append(ids, *run.Output)
	}
	ids = append(ids, run.FailedInputs...)
	ids, err := closeUp(ctx, src, ids, run)
	if err != nil {
		return nil, err
	}
	g, err := build(ctx, src, ids)
	if err != nil {
		return nil, err
	}
	g.Title = "run " + run.ID
	g.Run = run.ID
	g.mark(run.Output, run.FailedInputs)
	g.markContext(run.Input, inRun)
	return g, nil
}

// closeUp adds the versions a driver made between the run's input and
// its versions: forks, merges and moves carry no producer, so they are
// found by walking up parent links from the run's versions, stopping at
// the input, at versions of other runs and at versions made before the
// input (context: shown, not walked past).
func closeUp(ctx context.Context, src Source, ids []session.ID, run RunInfo) ([]session.ID, error) {
	var floor time.Time
	if run.Input != nil {
		in, err := src.Get(ctx, *run.Input)
		if err != nil {
			return nil, fmt.Errorf("lineage: input of run %s: %w", run.ID, err)
		}
		floor = in.CreatedAt
		ids = append(ids, *run.Input)
	}
	seen := make(map[session.ID]bool, len(ids))
	var out []session.ID
	queue := slices.Clone(ids)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
		if len(out) > MaxNodes {
			return nil, fmt.Errorf("lineage: run %s: %w: graph of more than %d versions", run.ID, session.ErrTooLarge, MaxNodes)
		}
		v, err := src.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("lineage: version %s: %w", id, err)
		}
		mine := v.Producer.Run == run.ID || v.Producer.Run == ""
		if (run.Input != nil && id == *run.Input) || !mine || v.CreatedAt.Before(floor) {
			continue
		}
		if run.Input == nil && v.Producer.Run != run.ID {
			continue // without an input, show one level of context
		}
		queue = append(queue, v.Parents...)
	}
	return out, nil
}

// build loads ids into a graph.
func build(ctx context.Context, src Source, ids []session.ID) (*Graph, error) {
	vs := make(map[session.ID]*session.Version)
	var order []*session.Version
	add := func(id session.ID) (*session.Version, error) {
		if v, ok := vs[id]; ok {
			return v, nil
		}
		if len(vs) >= MaxNodes {
			return nil, fmt.Errorf("lineage: %w: graph of more than %d versions", session.ErrTooLarge, MaxNodes)
		}
		v, err := src.Get(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("lineage: version %s: %w", id, err)
		}
		vs[id] = v
		order = append(order, v)
		return v, nil
	}
	for _, id := range ids {
		if _, err := add(id); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(order, func(a, b *session.Version) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	g := &Graph{Nodes: make([]Node, 0, len(order)), Edges: []Edge{}, versions: vs}
	for _, v := range order {
		n := Node{
			ID: v.ID, Op: v.Op, Run: v.Producer.Run, Step: v.Producer.Step, Agent: v.Producer.Agent,
			Model: v.Producer.Model, Chunks: len(v.Chunks), Len: v.Len, Tokens: v.Usage.TotalTokens,
			OwnTokens: v.Usage.TotalTokens, Status: StatusOK, Labels: labels(v), Snapshot: v.Placement.Snapshot,
			Hash: v.Hash, CreatedAt: v.CreatedAt,
		}
		ref := v.Base
		if ref == nil && len(v.Parents) > 0 {
			ref = &v.Parents[0] // compress: what it spent beyond the compressed version
		}
		if ref != nil {
			b, ok := vs[*ref]
			if !ok {
				b, _ = src.Get(ctx, *ref)
			}
			if b != nil {
				n.OwnTokens = max(v.Usage.TotalTokens-b.Usage.TotalTokens, 0)
			}
		}
		if v.Op == session.OpMerge || v.Op == session.OpFork || v.Op == session.OpDetach || v.Op == session.OpPlace {
			n.OwnTokens = 0 // usage carried over or summed, not spent
		}
		g.Nodes = append(g.Nodes, n)
		for i, p := range v.Parents {
			if _, ok := vs[p]; ok {
				g.Edges = append(g.Edges, Edge{From: p, To: v.ID, Kind: string(v.Op), Ordinal: i})
			}
		}
		if v.Op == session.OpDetach && v.Base != nil {
			if _, ok := vs[*v.Base]; ok {
				g.Edges = append(g.Edges, Edge{From: *v.Base, To: v.ID, Kind: EdgeDetach})
			}
		}
	}
	return g, nil
}

// labels names the evidence and tool calls among v's own chunks.
func labels(v *session.Version) []string {
	var out []string
	seen := make(map[string]bool)
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, c := range v.Chunks {
		switch c.Kind() {
		case session.KindSystem, session.KindUser, session.KindToolResult:
		case session.KindAssistant:
			for _, tc := range c.ToolCalls() {
				add("tool:" + tc.Function.Name)
			}
		case session.KindSelectorDecision:
			if choice := Choice(c); choice != "" {
				add("selected:" + choice)
			} else {
				add(string(c.Kind()))
			}
		default:
			add(string(c.Kind()))
		}
	}
	return out
}

// Choice returns the choice a selector_decision chunk records: the
// string field "choice", "chosen", "selected" or "route" of its payload, or
// a numeric "choice" looked up in its "candidates" (as pkg/flow records
// it; -1 reads "none"), cut to 40 characters; "" when there is none.
func Choice(c session.Chunk) string {
	var body map[string]any
	if json.Unmarshal(c.Payload(), &body) != nil {
		return ""
	}
	for _, k := range []string{"choice", "chosen", "selected", "route"} {
		switch x := body[k].(type) {
		case string:
			if x != "" {
				return Preview(x, 40)
			}
		case float64:
			cands, _ := body["candidates"].([]any)
			i := int(x)
			if float64(i) != x {
				continue
			}
			if i < 0 {
				return "none"
			}
			if i < len(cands) {
				if s, ok := cands[i].(string); ok {
					return Preview(s, 40)
				}
			}
			return "#" + strconv.Itoa(i)
		}
	}
	return ""
}

// markContext marks the versions of a run's graph made before the run:
// those outside the run that are its input or do not descend from it.
func (g *Graph) markContext(input *session.ID, inRun map[session.ID]bool) {
	after := make(map[session.ID]bool)
	if input != nil {
		after[*input] = true
		for _, e := range g.Edges { // nodes and edges are in creation order
			if after[e.From] {
				after[e.To] = true
			}
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if inRun[n.ID] || n.Status == StatusOutput || n.Status == StatusFailed {
			continue
		}
		if input == nil || n.ID == *input || !after[n.ID] {
			n.Status = StatusContext
		}
	}
}

// mark sets the nodes' statuses.
func (g *Graph) mark(output *session.ID, failed []session.ID) {
	index := make(map[session.ID]int, len(g.Nodes))
	for i, n := range g.Nodes {
		index[n.ID] = i
	}
	parents := make(map[session.ID][]session.ID)
	children := make(map[session.ID]int)
	for _, e := range g.Edges {
		parents[e.To] = append(parents[e.To], e.From)
		children[e.From]++
	}
	if output != nil {
		if _, ok := index[*output]; !ok {
			output = nil
		}
	}
	var reached map[session.ID]bool
	if output != nil {
		g.Output = output
		reached = map[session.ID]bool{*output: true}
		stack := []session.ID{*output}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, p := range parents[x] {
				if !reached[p] {
					reached[p] = true
					stack = append(stack, p)
				}
			}
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		switch {
		case output != nil && n.ID == *output:
			n.Status = StatusOutput
		case output != nil && reached[n.ID]:
			n.Status = StatusOK
		case output != nil:
			n.Status = StatusRejected
		case children[n.ID] == 0:
			n.Status = StatusHead
		default:
			n.Status = StatusOK
		}
	}
	for _, f := range failed {
		if i, ok := index[f]; ok && g.Nodes[i].Status != StatusOutput {
			g.Nodes[i].Status = StatusFailed
		}
	}
}
