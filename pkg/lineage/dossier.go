package lineage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
)

// Dossier is the evidence of one run, gathered for a self-contained
// document (WriteMarkdown, WriteHTML): the graph, the route taken and the
// branches rejected, every tool call, workspace changes, memory read and
// written, approvals, usage and cost, the output and the hash anchoring it.
type Dossier struct {
	Run    RunInfo `json:"run"`
	Status string  `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
	Graph  *Graph  `json:"graph"`
	// Route is the versions from the input to the output, in order.
	Route      []Node      `json:"route"`
	Rejected   []Node      `json:"rejected"`
	Decisions  []Decision  `json:"decisions"`
	ToolCalls  []ToolCall  `json:"tool_calls"`
	Workspace  []Workspace `json:"workspace"`
	MemoryRead []Evidence  `json:"memory_read"`
	// MemoryWritten lists memory items the run's versions wrote or
	// deleted, when the caller supplied them.
	MemoryWritten []MemoryWrite `json:"memory_written"`
	Approvals     []Evidence    `json:"approvals"`
	// Resumes lists the steps a worker resumed from their journal after
	// an earlier delivery died: "resumed after round N on worker W".
	Resumes []Resume   `json:"resumes,omitempty"`
	Usage   []UsageRow `json:"usage"`
	Output  *Output    `json:"output,omitempty"`
	// Verified is the check of the output's hash chain (Verify).
	Verified *VerifyReport `json:"verified,omitempty"`
}

// Resume is one resume of a step from its journal: the delivery on Worker
// went on after round AfterRound, which FromWorker recorded; the model was
// not asked again for rounds up to AfterRound, and their recorded tool
// results were reused.
type Resume struct {
	Step       string `json:"step"`
	AfterRound int    `json:"after_round"`
	Worker     string `json:"worker"`
	FromWorker string `json:"from_worker,omitempty"`
}

// Decision is a selector's recorded decision.
type Decision struct {
	Version session.ID      `json:"version"`
	Agent   string          `json:"agent,omitempty"`
	Choice  string          `json:"choice"`
	Body    json.RawMessage `json:"body"`
}

// ToolCall is one tool call with its result.
type ToolCall struct {
	Version   session.ID `json:"version"`
	Agent     string     `json:"agent,omitempty"`
	CallID    string     `json:"call_id"`
	Tool      string     `json:"tool"`
	Arguments string     `json:"arguments"`
	// Result is "" when no result was recorded (the step failed).
	Result   string `json:"result"`
	Backend  string `json:"backend,omitempty"`
	Snapshot string `json:"snapshot,omitempty"`
}

// Workspace is a step that changed its workspace snapshot.
type Workspace struct {
	Version session.ID `json:"version"`
	Agent   string     `json:"agent,omitempty"`
	Before  string     `json:"before"`
	After   string     `json:"after"`
}

// Evidence is one evidence chunk (memory recall, approval).
type Evidence struct {
	Version session.ID      `json:"version"`
	Agent   string          `json:"agent,omitempty"`
	Body    json.RawMessage `json:"body"`
}

// MemoryWrite is a memory item a version of the run wrote or deleted.
type MemoryWrite struct {
	Namespace string `json:"namespace"`
	URI       string `json:"uri"`
	Text      string `json:"text"`
	Version   string `json:"version"`
	Deleted   bool   `json:"deleted,omitempty"`
}

// UsageRow is what one agent spent on one branch.
type UsageRow struct {
	Agent string `json:"agent"`
	Model string `json:"model,omitempty"`
	// Branch is the fork that started the branch ("" for the trunk).
	Branch           string  `json:"branch"`
	Steps            int     `json:"steps"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TotalTokens      int64   `json:"total_tokens"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

// Price is a model's price in US dollars per million tokens.
type Price struct{ Prompt, Completion float64 }

// Output is the run's output version and its final answer.
type Output struct {
	Version session.ID `json:"version"`
	Hash    string     `json:"hash"`
	Answer  string     `json:"answer"`
	Len     int        `json:"len"`
}

// DossierOptions supplies what the Session Graph does not hold.
type DossierOptions struct {
	Status, Error string
	// MemoryWritten are the memory items written or deleted by versions of
	// the run (see MemoryWrite).
	MemoryWritten []MemoryWrite
	// Resumes are the run's steps' resumes, from their journals.
	Resumes []Resume
	// Prices per model, for the cost column; models without one cost 0.
	Prices map[string]Price
}

// BuildDossier gathers the evidence of a run from the graph.
func BuildDossier(ctx context.Context, src Source, run RunInfo, opts DossierOptions) (*Dossier, error) {
	g, err := ForRun(ctx, src, run)
	if err != nil {
		return nil, err
	}
	d := &Dossier{Run: run, Status: opts.Status, Error: opts.Error, Graph: g, MemoryWritten: opts.MemoryWritten, Resumes: opts.Resumes,
		Route: []Node{}, Rejected: []Node{}, Decisions: []Decision{}, ToolCalls: []ToolCall{}, Workspace: []Workspace{},
		MemoryRead: []Evidence{}, Approvals: []Evidence{}, Usage: []UsageRow{}}
	if d.MemoryWritten == nil {
		d.MemoryWritten = []MemoryWrite{}
	}
	results := make(map[string]string)
	type usageKey struct{ agent, model, branch string }
	usage := make(map[usageKey]*UsageRow)
	var usageOrder []usageKey
	branch := make(map[session.ID]string)
	outer := make(map[string]string) // fork → the branch it was made on
	for _, n := range g.Nodes {
		v, _ := g.Version(n.ID)
		switch n.Status {
		case StatusOutput, StatusOK:
			if run.Output != nil {
				d.Route = append(d.Route, n)
			}
		case StatusRejected, StatusFailed:
			d.Rejected = append(d.Rejected, n)
		}
		// A node's branch is the nearest fork up its first-parent chain; a
		// merge closes its first parent's branch, returning to the branch
		// that fork was made on.
		switch {
		case n.Op == session.OpFork:
			branch[n.ID] = n.ID.String()
			outer[n.ID.String()] = branch[v.Parents[0]]
		case n.Op == session.OpMerge:
			branch[n.ID] = outer[branch[v.Parents[0]]]
		case len(v.Parents) > 0:
			branch[n.ID] = branch[v.Parents[0]]
		}
		if n.Status == StatusContext || v.Op == session.OpMerge {
			continue // merges copy chunks made elsewhere
		}
		for _, c := range v.Chunks {
			switch c.Kind() {
			case session.KindAssistant:
				for _, tc := range c.ToolCalls() {
					d.ToolCalls = append(d.ToolCalls, ToolCall{Version: v.ID, Agent: v.Producer.Agent, CallID: tc.ID,
						Tool: tc.Function.Name, Arguments: tc.Function.Arguments, Backend: v.Placement.Backend, Snapshot: v.Placement.Snapshot})
				}
			case session.KindToolResult:
				if r, ok := c.ToolResult(); ok {
					results[r.ToolCallID] = r.Content
				}
			case session.KindSelectorDecision:
				d.Decisions = append(d.Decisions, Decision{Version: v.ID, Agent: v.Producer.Agent, Choice: Choice(c), Body: c.Payload()})
			case session.KindMemoryRecall:
				d.MemoryRead = append(d.MemoryRead, Evidence{Version: v.ID, Agent: v.Producer.Agent, Body: c.Payload()})
			case session.KindApproval:
				d.Approvals = append(d.Approvals, Evidence{Version: v.ID, Agent: v.Producer.Agent, Body: c.Payload()})
			}
		}
		if v.Op == session.OpStep || v.Op == session.OpCompress || v.Op == session.OpReplay {
			var before string
			var baseUsage session.Usage
			if ref := refOf(v); ref != nil {
				if b, err := src.Get(ctx, *ref); err == nil {
					before, baseUsage = b.Placement.Snapshot, b.Usage
				}
			}
			if before != v.Placement.Snapshot {
				d.Workspace = append(d.Workspace, Workspace{Version: v.ID, Agent: v.Producer.Agent, Before: before, After: v.Placement.Snapshot})
			}
			spent := v.Usage.Sub(baseUsage)
			k := usageKey{v.Producer.Agent, v.Producer.Model, branch[n.ID]}
			row, ok := usage[k]
			if !ok {
				row = &UsageRow{Agent: k.agent, Model: k.model, Branch: k.branch}
				usage[k] = row
				usageOrder = append(usageOrder, k)
			}
			row.Steps++
			row.PromptTokens += spent.PromptTokens
			row.CompletionTokens += spent.CompletionTokens
			row.TotalTokens += spent.TotalTokens
		}
	}
	for i := range d.ToolCalls {
		d.ToolCalls[i].Result = results[d.ToolCalls[i].CallID]
	}
	for _, k := range usageOrder {
		row := usage[k]
		if p, ok := opts.Prices[row.Model]; ok {
			row.CostUSD = (float64(row.PromptTokens)*p.Prompt + float64(row.CompletionTokens)*p.Completion) / 1e6
		}
		d.Usage = append(d.Usage, *row)
	}
	if run.Output != nil {
		v, err := src.Get(ctx, *run.Output)
		if err != nil {
			return nil, fmt.Errorf("lineage: dossier: output %s: %w", *run.Output, err)
		}
		tr, err := src.Transcript(ctx, v.ID)
		if err != nil {
			return nil, fmt.Errorf("lineage: dossier: output transcript: %w", err)
		}
		out := &Output{Version: v.ID, Hash: v.Hash, Len: v.Len}
		for i := len(tr) - 1; i >= 0; i-- {
			if tr[i].Kind() == session.KindAssistant && tr[i].Text() != "" {
				out.Answer = tr[i].Text()
				break
			}
		}
		d.Output = out
		rep, err := Verify(ctx, src, v.ID)
		if err != nil && len(rep.Problems) == 0 {
			return nil, err
		}
		d.Verified = &rep
	}
	return d, nil
}

func refOf(v *session.Version) *session.ID {
	if v.Base != nil {
		return v.Base
	}
	if len(v.Parents) > 0 {
		return &v.Parents[0]
	}
	return nil
}

// svg renders the dossier's graph.
func (d *Dossier) svg() (string, error) {
	var b bytes.Buffer
	if err := d.Graph.WriteSVG(&b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// pretty indents a JSON body for display.
func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// prettyText indents s when it is JSON, else returns it.
func prettyText(s string) string {
	if json.Valid([]byte(s)) {
		return pretty(json.RawMessage(s))
	}
	return s
}
