package lincheck_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/lincheck"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

const runReply = "answer from the scripted model"

var scriptedSpec = fmt.Sprintf(`{"name":"lin","model":"scripted","script":[{"content":%q}]}`, runReply)

func transcriptOf(chunks []session.Chunk) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = string(c.Kind()) + ": " + c.Text()
	}
	return out
}

// api performs the model's operations through the coordinator's HTTP API.
type api struct {
	cl *client.Client
}

func (a api) transcript(ctx context.Context, id string) ([]string, error) {
	var t struct {
		Chunks []session.Chunk `json:"chunks"`
	}
	if err := a.cl.Do(ctx, "GET", "/v1/sessions/"+id+"/transcript", nil, &t); err != nil {
		return nil, err
	}
	return transcriptOf(t.Chunks), nil
}

func (a api) create(ctx context.Context, path string, body any) (lincheck.Output, error) {
	var v struct {
		ID string `json:"id"`
	}
	if err := a.cl.Do(ctx, "POST", path, body, &v); err != nil {
		return lincheck.Output{}, err
	}
	t, err := a.transcript(ctx, v.ID)
	return lincheck.Output{ID: v.ID, Transcript: t}, err
}

func (a api) do(ctx context.Context, root string, in lincheck.Input) (lincheck.Output, error) {
	switch in.Kind {
	case lincheck.Fork:
		return a.create(ctx, "/v1/sessions/"+in.ID+"/fork", nil)
	case lincheck.Append:
		return a.create(ctx, "/v1/sessions/"+in.ID+"/append", map[string]string{"user": in.Text})
	case lincheck.Merge:
		return a.create(ctx, "/v1/sessions/"+in.ID+"/merge", map[string]string{"other": in.Other})
	case lincheck.Run:
		var r runs.Run
		if err := a.cl.Do(ctx, "POST", "/v1/runs", map[string]any{"agent": []byte(scriptedSpec), "session": in.ID}, &r); err != nil {
			return lincheck.Output{}, err
		}
		for !r.Status.Terminal() {
			select {
			case <-ctx.Done():
				return lincheck.Output{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if err := a.cl.Do(ctx, "GET", "/v1/runs/"+r.ID, nil, &r); err != nil {
				return lincheck.Output{}, err
			}
		}
		if r.Status != runs.RunSucceeded || r.Output == nil {
			return lincheck.Output{}, fmt.Errorf("run %s %s: %s", r.ID, r.Status, r.Error)
		}
		t, err := a.transcript(ctx, r.Output.String())
		return lincheck.Output{ID: r.Output.String(), Transcript: t}, err
	case lincheck.Read:
		t, err := a.transcript(ctx, in.ID)
		return lincheck.Output{Transcript: t}, err
	case lincheck.Descendants:
		var d struct {
			Versions []struct {
				ID string `json:"id"`
			} `json:"versions"`
		}
		if err := a.cl.Do(ctx, "GET", "/v1/sessions/"+root+"/descendants?depth=0", nil, &d); err != nil {
			return lincheck.Output{}, err
		}
		out := lincheck.Output{IDs: []string{}}
		for _, v := range d.Versions {
			out.IDs = append(out.IDs, v.ID)
		}
		return out, nil
	}
	return lincheck.Output{}, fmt.Errorf("unknown operation %q", in.Kind)
}

// record runs clients×ops random operations on one session tree at once and
// returns the history, the root and its transcript.
func record(t *testing.T, cl *client.Client, clients, ops int) ([]porcupine.Operation, string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := api{cl: cl}
	root, err := a.create(ctx, "/v1/sessions", map[string]string{"user": "the shared root"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var mu sync.Mutex
	known := []string{root.ID}
	var history []porcupine.Operation
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			pick := func() string {
				mu.Lock()
				defer mu.Unlock()
				return known[rng.IntN(len(known))]
			}
			for i := range ops {
				var in lincheck.Input
				switch n := rng.IntN(10); {
				case n < 2:
					in = lincheck.Input{Kind: lincheck.Fork, ID: pick()}
				case n < 4:
					in = lincheck.Input{Kind: lincheck.Append, ID: pick(), Text: fmt.Sprintf("c%d-%d", c, i)}
				case n < 5:
					in = lincheck.Input{Kind: lincheck.Merge, ID: pick(), Other: pick()}
					for tries := 0; in.Other == in.ID && tries < 10; tries++ {
						in.Other = pick()
					}
				case n < 6:
					in = lincheck.Input{Kind: lincheck.Run, ID: pick()}
				case n < 8:
					in = lincheck.Input{Kind: lincheck.Read, ID: pick()}
				default:
					in = lincheck.Input{Kind: lincheck.Descendants}
				}
				call := time.Since(start).Nanoseconds()
				out, err := a.do(ctx, root.ID, in)
				ret := time.Since(start).Nanoseconds()
				var apiErr *client.APIError
				switch {
				case errors.As(err, &apiErr) && apiErr.Status < 500:
					// Refused (e.g. a merge of a version with itself): the
					// model requires that it changed nothing.
					out = lincheck.Output{Failed: true}
				case err != nil:
					errs <- fmt.Errorf("client %d: %s: %w", c, in.Kind, err)
					return
				}
				mu.Lock()
				if out.ID != "" {
					known = append(known, out.ID)
				}
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return history, root.ID, root.Transcript
}

// TestSessionGraphLinearizable has eight clients fork, append, merge, run
// and read one session tree at once through the coordinator's HTTP API (the
// dev stack on Postgres, two in-process workers, the scripted model) and
// checks the recorded history against the sequential model. Then it
// corrupts the history and checks the model rejects it.
func TestSessionGraphLinearizable(t *testing.T) {
	t.Parallel()
	clients, ops := 8, 25
	if testing.Short() {
		clients, ops = 4, 10
	}
	dir := t.TempDir()
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: testdb.Postgres(t), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	history, root, rootTranscript := record(t, cl, clients, ops)
	model := lincheck.Model(root, rootTranscript, runReply)
	res, info := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	if res != porcupine.Ok {
		path := filepath.Join(t.TempDir(), "history.html")
		_ = porcupine.VisualizePath(model, info, path)
		t.Fatalf("history of %d operations is %s (visualization: %s)", len(history), res, path)
	}
	counts := map[lincheck.Kind]int{}
	refused := 0
	for _, op := range history {
		counts[op.Input.(lincheck.Input).Kind]++
		if op.Output.(lincheck.Output).Failed {
			refused++
		}
	}
	t.Logf("linearizable: %d operations from %d clients: %v (%d refused with a 4xx, e.g. a merge of a version with itself)", len(history), clients, counts, refused)

	// The same history with one Descendants result missing a version whose
	// creation had returned before the read was called.
	if bad, ok := dropCreated(history); ok {
		if porcupine.CheckOperations(model, bad) {
			t.Fatal("a Descendants read missing an already created version was accepted")
		}
	} else {
		t.Fatal("no Descendants read after a creation to corrupt: the history is too small")
	}
	// And with one created version's transcript altered.
	bad := slices.Clone(history)
	for i, op := range bad {
		out := op.Output.(lincheck.Output)
		if out.ID != "" && len(out.Transcript) > 0 {
			out.Transcript = append(slices.Clone(out.Transcript[:len(out.Transcript)-1]), "user: tampered")
			bad[i].Output = out
			break
		}
	}
	if porcupine.CheckOperations(model, bad) {
		t.Fatal("a created version with a wrong transcript was accepted")
	}
}

// dropCreated returns history with one Descendants result missing a
// version created (returned) before the read was called.
func dropCreated(history []porcupine.Operation) ([]porcupine.Operation, bool) {
	for i, op := range history {
		if op.Input.(lincheck.Input).Kind != lincheck.Descendants {
			continue
		}
		for _, c := range history {
			out := c.Output.(lincheck.Output)
			if out.ID == "" || c.Return >= op.Call {
				continue
			}
			got := op.Output.(lincheck.Output)
			idx := slices.Index(got.IDs, out.ID)
			if idx < 0 {
				continue
			}
			bad := slices.Clone(history)
			got.IDs = slices.Delete(slices.Clone(got.IDs), idx, idx+1)
			bad[i].Output = got
			return bad, true
		}
	}
	return nil, false
}

// TestModelRejects checks the model on small hand-written histories: what
// it must accept, and what it must refuse.
func TestModelRejects(t *testing.T) {
	t.Parallel()
	rootT := []string{"user: hi"}
	m := lincheck.Model("r", rootT, "ok")
	op := func(client int, call, ret int64, in lincheck.Input, out lincheck.Output) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	fork := op(0, 0, 10, lincheck.Input{Kind: lincheck.Fork, ID: "r"}, lincheck.Output{ID: "f", Transcript: rootT})
	appendF := op(0, 11, 20, lincheck.Input{Kind: lincheck.Append, ID: "f", Text: "x"}, lincheck.Output{ID: "a", Transcript: []string{"user: hi", "user: x"}})
	appendR := op(2, 0, 15, lincheck.Input{Kind: lincheck.Append, ID: "r", Text: "y"}, lincheck.Output{ID: "b", Transcript: []string{"user: hi", "user: y"}})
	merge := op(0, 21, 30, lincheck.Input{Kind: lincheck.Merge, ID: "a", Other: "b"},
		lincheck.Output{ID: "m", Transcript: []string{"user: hi", "user: x", "user: y"}})
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"sequential fork, append, merge", []porcupine.Operation{fork, appendF, appendR, merge}, true},
		{"a read concurrent with the fork may miss it",
			[]porcupine.Operation{fork, op(1, 5, 8, lincheck.Input{Kind: lincheck.Descendants}, lincheck.Output{IDs: []string{}})}, true},
		{"a read concurrent with the fork may see it",
			[]porcupine.Operation{fork, op(1, 5, 8, lincheck.Input{Kind: lincheck.Descendants}, lincheck.Output{IDs: []string{"f"}})}, true},
		{"a read after the fork returned must see it",
			[]porcupine.Operation{fork, op(1, 12, 14, lincheck.Input{Kind: lincheck.Descendants}, lincheck.Output{IDs: []string{}})}, false},
		{"a read that returned before the fork was called cannot see it",
			[]porcupine.Operation{op(0, 20, 30, lincheck.Input{Kind: lincheck.Fork, ID: "r"}, lincheck.Output{ID: "f", Transcript: rootT}),
				op(1, 5, 8, lincheck.Input{Kind: lincheck.Descendants}, lincheck.Output{IDs: []string{"f"}})}, false},
		{"fork with another transcript",
			[]porcupine.Operation{op(0, 0, 10, lincheck.Input{Kind: lincheck.Fork, ID: "r"}, lincheck.Output{ID: "f", Transcript: []string{"user: other"}})}, false},
		{"append that lost the text",
			[]porcupine.Operation{op(0, 0, 10, lincheck.Input{Kind: lincheck.Append, ID: "r", Text: "x"}, lincheck.Output{ID: "a", Transcript: rootT})}, false},
		{"the same id created twice",
			[]porcupine.Operation{fork, op(1, 11, 20, lincheck.Input{Kind: lincheck.Fork, ID: "r"}, lincheck.Output{ID: "f", Transcript: rootT})}, false},
		{"merge duplicating the shared history",
			[]porcupine.Operation{fork, appendF, appendR, op(0, 21, 30, lincheck.Input{Kind: lincheck.Merge, ID: "a", Other: "b"},
				lincheck.Output{ID: "m", Transcript: []string{"user: hi", "user: x", "user: hi", "user: y"}})}, false},
		// root → a (x) and b (y); m = merge(a, b); b2 = append(b, z);
		// merge(m, b2) adds only z: y came in with m (the rule before
		// origins added y again).
		{"merge of a merge adds only what is new",
			[]porcupine.Operation{fork, appendF, appendR, merge,
				op(2, 31, 35, lincheck.Input{Kind: lincheck.Append, ID: "b", Text: "z"}, lincheck.Output{ID: "b2", Transcript: []string{"user: hi", "user: y", "user: z"}}),
				op(0, 36, 40, lincheck.Input{Kind: lincheck.Merge, ID: "m", Other: "b2"},
					lincheck.Output{ID: "m2", Transcript: []string{"user: hi", "user: x", "user: y", "user: z"}})}, true},
		{"merge of a merge repeating history",
			[]porcupine.Operation{fork, appendF, appendR, merge,
				op(2, 31, 35, lincheck.Input{Kind: lincheck.Append, ID: "b", Text: "z"}, lincheck.Output{ID: "b2", Transcript: []string{"user: hi", "user: y", "user: z"}}),
				op(0, 36, 40, lincheck.Input{Kind: lincheck.Merge, ID: "m", Other: "b2"},
					lincheck.Output{ID: "m2", Transcript: []string{"user: hi", "user: x", "user: y", "user: y", "user: z"}})}, false},
		{"a run's output without the answer",
			[]porcupine.Operation{op(0, 0, 10, lincheck.Input{Kind: lincheck.Run, ID: "r"}, lincheck.Output{ID: "s", Transcript: rootT})}, false},
		{"a read of a version's transcript as another's",
			[]porcupine.Operation{appendR, op(1, 16, 20, lincheck.Input{Kind: lincheck.Read, ID: "b"}, lincheck.Output{Transcript: rootT})}, false},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperations(m, tc.history); got != tc.want {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
