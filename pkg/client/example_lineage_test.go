package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/session"
)

// The examples of this file run against the same coordinator as those of
// example_test.go (serverURL, bootstrapToken): the lineage operations
// (verify, replay, dossier), the admin ones (gc, pins, redaction, check)
// and memory. They print counts, booleans and texts, never ids or times.

// exampleRun submits the greeter agent and waits for its run to end.
func exampleRun(ctx context.Context, cl *client.Client) api.Run {
	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "Hi!"})
	if err != nil {
		log.Fatal(err)
	}
	final, err := cl.WaitRun(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	if final.Output == nil {
		log.Fatalf("run %s ended %s without an output", final.ID, final.Status)
	}
	return final
}

// exampleSession commits a two-version session: user text, then an
// assistant reply appended. It returns both versions.
func exampleSession(ctx context.Context, cl *client.Client, user, assistant string) (root, head *api.Version) {
	root, err := cl.NewSession(ctx, api.SessionRequest{User: user})
	if err != nil {
		log.Fatal(err)
	}
	head, err = cl.Append(ctx, root.ID, api.SessionRequest{Assistant: assistant})
	if err != nil {
		log.Fatal(err)
	}
	return root, head
}

// Verify recomputes a version's hash chain from the coordinator's stored
// rows; VerifyAll does so for every version of the caller's tenant. A
// problem is in the report, not an error.
func ExampleClient_Verify() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	_, head := exampleSession(ctx, cl, "What is 2+2?", "4")
	rep, err := cl.Verify(ctx, head.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version:", rep.OK, rep.ID == head.ID.String(), rep.Versions, rep.Chunks, len(rep.Problems))
	all, err := cl.VerifyAll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tenant:", all.OK, all.Versions >= 2, len(all.Problems))
	_, err = cl.Verify(ctx, session.NewID())
	fmt.Println("unknown version:", errors.Is(err, client.ErrNotFound))
	// Output:
	// version: true true 2 2 0
	// tenant: true true 0
	// unknown version: true
}

// Replay re-executes the agent step that made a version, in the
// coordinator, from its recorded model replies (no model is called), and
// says whether every hash came out the same. The replay is a new version
// branching from the step's input.
func ExampleClient_Replay() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run := exampleRun(ctx, cl)
	rep, err := cl.Replay(ctx, *run.Output, api.ReplayRequest{Strict: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("identical:", rep.Identical, rep.Of == *run.Output, len(rep.Divergences))
	replay, err := cl.GetSession(ctx, *rep.Replay)
	if err != nil {
		log.Fatal(err)
	}
	tr, err := cl.Transcript(ctx, replay.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replay:", replay.Op, tr.Chunks[len(tr.Chunks)-1].Text())
	// The replay descends from the run's input, not from its output.
	fromInput, err := cl.IsAncestor(ctx, run.Input, replay.ID)
	if err != nil {
		log.Fatal(err)
	}
	fromOutput, err := cl.IsAncestor(ctx, *run.Output, replay.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("descends from input:", fromInput, "from output:", fromOutput)
	// The input was not made by an agent step: nothing to replay.
	_, err = cl.Replay(ctx, run.Input, api.ReplayRequest{})
	var apiErr *client.APIError
	fmt.Println("replay the input:", errors.As(err, &apiErr), apiErr.Status)
	// Output:
	// identical: true true 0
	// replay: replay Hello!
	// descends from input: true from output: false
	// replay the input: true 400
}

// A run's evidence dossier: as data (DossierData), or as a Markdown or HTML
// document (Dossier).
func ExampleClient_Dossier() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run := exampleRun(ctx, cl)
	d, err := cl.DossierData(ctx, run.ID, []string{"scripted=1/2"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", d.Status, "answer:", d.Output.Answer, "problems:", len(d.Verified.Problems))
	fmt.Println("route:", len(d.Route), "tool calls:", len(d.ToolCalls), "usage rows:", len(d.Usage))
	var md bytes.Buffer
	if err := cl.Dossier(ctx, run.ID, client.DossierOptions{}, &md); err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(&md)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "## ") || strings.HasPrefix(sc.Text(), "- status:") {
			fmt.Println(sc.Text())
		}
	}
	err = cl.Dossier(ctx, "run_nope", client.DossierOptions{Format: api.DossierHTML}, &md)
	fmt.Println("unknown run:", errors.Is(err, client.ErrNotFound))
	// Output:
	// status: succeeded answer: Hello! problems: 0
	// route: 1 tool calls: 0 usage rows: 1
	// - status: succeeded
	// ## Graph
	// ## Route taken
	// ## Tool calls
	// ## Workspace changes
	// ## Memory
	// ## Approvals
	// ## Usage and cost
	// ## Final output
	// ## Anchor
	// unknown run: true
}

// RunGraph is the lineage of one run: its input, the versions its steps
// made, and its output.
func ExampleClient_RunGraph() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run := exampleRun(ctx, cl)
	g, err := cl.RunGraph(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("nodes:", len(g.Nodes), "edges:", len(g.Edges))
	for _, n := range g.Nodes {
		fmt.Println(n.Op, n.Len, n.ID == run.Input, n.ID == *run.Output)
	}
	// WriteRunGraph and WriteSessionGraph write the graph as a document:
	// DOT, Mermaid, SVG or OpenRath JSONL.
	var dot bytes.Buffer
	if err := cl.WriteRunGraph(ctx, run.ID, lineage.FormatDOT, &dot); err != nil {
		log.Fatal(err)
	}
	first, _, _ := strings.Cut(dot.String(), "\n")
	fmt.Println("dot:", first, "arrows:", strings.Count(dot.String(), "->"))
	var mer bytes.Buffer
	if err := cl.WriteSessionGraph(ctx, run.Input, client.GraphOptions{}, lineage.FormatMermaid, &mer); err != nil {
		log.Fatal(err)
	}
	first, _, _ = strings.Cut(mer.String(), "\n")
	fmt.Println("mermaid:", first)
	_, err = cl.RunGraph(ctx, "run_nope")
	fmt.Println("unknown run:", errors.Is(err, client.ErrNotFound))
	// Output:
	// nodes: 2 edges: 1
	// create 1 true false
	// step 2 false true
	// dot: digraph rath { arrows: 1
	// mermaid: flowchart TD
	// unknown run: true
}

// A pin keeps a version and everything it descends from through gc. A dry
// run of gc reports what it would free: pinning a two-version session
// takes its two versions, two chunks and one edge out of that.
func ExampleClient_Pin() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	_, head := exampleSession(ctx, cl, "Draft the release notes.", "Draft: fixes and features.")
	// Keep only what was made in the last nanosecond: everything older that
	// nothing keeps would go.
	before, err := cl.GC(ctx, time.Nanosecond, true)
	if err != nil {
		log.Fatal(err)
	}
	pin, err := cl.Pin(ctx, head.ID, "release 1.0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pinned:", pin.Pinned, pin.Note)
	after, err := cl.GC(ctx, time.Nanosecond, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("dry run:", after.DryRun, "kept:", before.Versions-after.Versions, before.Chunks-after.Chunks, before.Edges-after.Edges)
	pins, err := cl.Pins(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range pins.Pins {
		if p.ID == head.ID {
			fmt.Println("listed:", p.Note)
		}
	}
	un, err := cl.Unpin(ctx, head.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pinned:", un.Pinned)
	_, err = cl.Unpin(ctx, head.ID)
	fmt.Println("unpin again:", errors.Is(err, client.ErrNotFound))
	// Output:
	// pinned: true release 1.0
	// dry run: true kept: 2 2 1
	// listed: release 1.0
	// pinned: false
	// unpin again: true
}

// GC deletes the versions nothing keeps that are older than the horizon
// (admin scope). Nothing in this coordinator is a month old: it frees
// nothing. A horizon must be positive.
func ExampleClient_GC() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := cl.GC(ctx, 30*24*time.Hour, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("freed:", rep.Versions, rep.Chunks, rep.Edges, rep.Bytes, "dry run:", rep.DryRun)
	_, err = cl.GC(ctx, 0, true)
	var apiErr *client.APIError
	fmt.Println("keep 0:", errors.As(err, &apiErr), apiErr.Status)
	// Output:
	// freed: 0 0 0 0 dry run: false
	// keep 0: true 400
}

// Redact erases a chunk's content but keeps its hash: the transcript reads
// a marker in its place, and the hash chain still verifies.
func ExampleClient_Redact() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	// Each run of the example redacts a chunk of its own.
	secret := "My card number is 4111 1111 1111 1111 (" + session.NewID().String() + ")."
	root, head := exampleSession(ctx, cl, secret, "Noted.")
	rep, err := cl.Redact(ctx, head.ID, 0, "card number")
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rep.Redactions {
		// The chunk is stored in the root version, which head extends.
		fmt.Println("redacted:", r.Version == root.ID, r.Ord, r.Reason)
	}
	tr, err := cl.Transcript(ctx, head.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range tr.Chunks {
		fmt.Printf("%s: %s %q\n", c.Kind(), c.Text(), c.RedactionReason())
	}
	v, err := cl.Verify(ctx, head.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("verifies:", v.OK)
	_, err = cl.Redact(ctx, head.ID, 0, "again")
	var apiErr *client.APIError
	fmt.Println("again:", errors.As(err, &apiErr), apiErr.Code)
	list, err := cl.Redactions(ctx)
	if err != nil {
		log.Fatal(err)
	}
	n := 0
	for _, r := range list.Redactions {
		if r.Version == root.ID {
			n++
		}
	}
	fmt.Println("recorded:", n, "problems:", len(list.Problems))
	// Output:
	// redacted: true 0 card number
	// user: [redacted] "card number"
	// assistant: Noted. ""
	// verifies: true
	// again: true conflict
	// recorded: 1 problems: 0
}

// Check runs the invariant checker over the tenant's rows: the Session
// Graph, runs and steps.
func ExampleClient_Check() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	exampleRun(ctx, cl)
	rep, err := cl.Check(ctx, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("checked:", rep.Versions > 0, rep.Chunks > 0, rep.Runs > 0, rep.Steps > 0)
	fmt.Println("problems:", len(rep.Problems))
	// A read token may not check.
	tok, err := cl.CreateToken(ctx, api.CreateTokenRequest{Name: "check-reader", Scope: api.ScopeRead})
	if err != nil {
		log.Fatal(err)
	}
	reader, err := client.New(serverURL, tok.Secret)
	if err != nil {
		log.Fatal(err)
	}
	_, err = reader.Check(ctx, false)
	var apiErr *client.APIError
	fmt.Println("read token:", errors.As(err, &apiErr), apiErr.Status)
	if _, err := cl.RevokeToken(ctx, tok.ID); err != nil {
		log.Fatal(err)
	}
	// Output:
	// checked: true true true true
	// problems: 0
	// read token: true 403
}

// Memory is the coordinator's memory as a memory.Store: items are written,
// read, listed, recalled by BM25 and deleted (leaving a tombstone).
func ExampleClient_Memory() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	mem := cl.Memory()
	const ns = "example-trips"
	for _, w := range []memory.Write{
		{URI: "memory://user/trips/kyoto", Text: "Kyoto in April: book the ryokan early.", Metadata: map[string]string{"season": "spring"}},
		{URI: "memory://user/trips/osaka", Text: "Osaka: try the street food in Dotonbori."},
	} {
		if _, err := mem.Remember(ctx, ns, w); err != nil {
			log.Fatal(err)
		}
	}
	it, err := mem.Read(ctx, ns, "memory://user/trips/kyoto")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read:", it.Text, it.Metadata["season"])
	hits, err := mem.Recall(ctx, ns, memory.Query{Text: "ryokan", TopK: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recall:", len(hits), hits[0].URI)
	if err := mem.Delete(ctx, ns, "memory://user/trips/osaka", ""); err != nil {
		log.Fatal(err)
	}
	_, err = mem.Read(ctx, ns, "memory://user/trips/osaka")
	var merr *memory.Error
	fmt.Println("deleted:", errors.Is(err, client.ErrNotFound), errors.As(err, &merr) && merr.Kind == memory.KindNotFound)
	items, err := mem.List(ctx, ns, memory.ListOptions{Scope: "memory://user/trips"})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range items {
		fmt.Println("listed:", it.URI)
	}
	all, err := mem.List(ctx, ns, memory.ListOptions{Scope: "memory://user/trips", IncludeDeleted: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range all {
		fmt.Println("with tombstones:", it.URI, !it.DeletedAt.IsZero())
	}
	// Output:
	// read: Kyoto in April: book the ryokan early. spring
	// recall: 1 memory://user/trips/kyoto
	// deleted: true true
	// listed: memory://user/trips/kyoto
	// with tombstones: memory://user/trips/kyoto false
	// with tombstones: memory://user/trips/osaka true
}

// Commit archives a session version's transcript into memory, as an
// agent's "commit": true does; the item records the version that wrote it.
func ExampleMemory_Commit() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	_, head := exampleSession(ctx, cl, "Where should we go in April?", "Kyoto, for the cherry blossoms.")
	mem := cl.Memory()
	rep, err := mem.Commit(ctx, "example-archive", head.ID.String(), "planner")
	if err != nil {
		log.Fatal(err)
	}
	uri := rep.Transcript.URI
	fmt.Println("archived:", uri == "memory://session/"+head.ID.String()+"/transcript", rep.Transcript.VersionID == head.ID.String())
	fmt.Println("agent:", rep.Transcript.Metadata["agent"])
	// Recall within this session's scope finds the transcript.
	hits, err := mem.Recall(ctx, "example-archive", memory.Query{Text: "cherry blossoms", Scope: "memory://session/" + head.ID.String()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("recall:", len(hits), hits[0].URI == uri, hits[0].VersionID == head.ID.String())
	// Output:
	// archived: true true
	// agent: planner
	// recall: 1 true true
}

// Replay a whole workflow run — here a selector step, then the agent it
// chose — from its recording: no model is called, the steps land on a
// new replay branch, and each step's hashes are compared.
func ExampleClient_ReplayRun() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run, err := cl.SubmitWorkflow(ctx, api.SubmitRequest{Driver: api.DriverClient, Message: "Hi!"})
	if err != nil {
		log.Fatal(err)
	}
	step := func(key, call string, in session.ID) session.ID {
		st, err := cl.PutStepWait(ctx, run.ID, key, json.RawMessage(call), in, 0)
		for err == nil && !st.Terminal() {
			st, err = cl.GetStep(ctx, run.ID, key, 30e9)
		}
		if err != nil || st.Output == nil {
			log.Fatalf("step %s: %v %+v", key, err, st)
		}
		return *st.Output
	}
	router := `{"name": "router", "model": "scripted", "script": [{"content": "0"}]}`
	chosen := step("0", `{"kind": "select", "agent": `+router+`, "candidates": ["greets"]}`, run.Input)
	out := step("1", `{"kind": "agent", "agent": `+greeter+`}`, chosen)
	if _, err := cl.CompleteRun(ctx, run.ID, out); err != nil {
		log.Fatal(err)
	}
	rep, err := cl.ReplayRun(ctx, run.ID, api.RunReplayRequest{Strict: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("identical:", rep.Identical, "new branch:", *rep.Replay != out)
	for _, s := range rep.Steps {
		fmt.Println(s.Key, s.Kind, s.Identical)
	}
	// Output:
	// identical: true new branch: true
	// 0 select true
	// 1 agent true
}

// Rerun a workflow run from one of its steps with another agent: the new
// run keeps the steps before it as committed and runs the rest live.
func ExampleClient_RerunRun() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	workflow := `
agents:
  drafter: {model: scripted, script: [{content: "A draft."}]}
  polisher: {model: scripted, script: [{content: "unused"}, {content: "Polished."}]}
steps:
  - agent: drafter
  - agent: polisher
`
	wait := func(id string) api.Run {
		run, err := cl.WaitRun(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		return run
	}
	run := wait(must(cl.SubmitWorkflow(ctx, api.SubmitRequest{Workflow: workflow, Message: "Write."})).ID)
	// Rerun from the second step with a polisher that answers otherwise.
	polisher := json.RawMessage(`{"name": "polisher", "model": "scripted", "script": [{"content": "unused"}, {"content": "Shiny."}]}`)
	rerun, err := cl.RerunRun(ctx, run.ID, api.RunRerunRequest{From: run.Steps[1].Key, Agents: map[string]json.RawMessage{"polisher": polisher}})
	if err != nil {
		log.Fatal(err)
	}
	rerun = wait(rerun.ID)
	tr, err := cl.Transcript(ctx, *rerun.Output)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rerun.Status, rerun.ID != run.ID)
	fmt.Println("kept the draft:", *rerun.Steps[0].Output == *run.Steps[0].Output)
	fmt.Println("answer:", tr.Chunks[len(tr.Chunks)-1].Text())
	// Output:
	// succeeded true
	// kept the draft: true
	// answer: Shiny.
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
