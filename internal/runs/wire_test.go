package runs_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// TestAPIKeepsTheJSON: a run and its steps encode to the same JSON as the
// API's types (docs/api.md, the UI and older clients read these names), and
// every field of runs.Run and runs.Step reaches the API's.
func TestAPIKeepsTheJSON(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in, out := session.NewID(), session.NewID()
	st := runs.Step{ID: "run_x/k", RunID: "run_x", Key: "k", Ordinal: 1, Target: json.RawMessage(`{"kind":"agent"}`),
		Digest: "sha256:d", Status: runs.StepCommitted, Input: in, Output: &out, Attempts: 2, Worker: "w1", Error: "e",
		CreatedAt: now, UpdatedAt: now, StartedAt: &now, FinishedAt: &now}
	r := runs.Run{ID: "run_x", Kind: runs.KindWorkflow, Status: runs.RunFailed, Driver: runs.DriverClient, Workflow: "steps: []",
		Deadline: &now, Queue: "q", Target: json.RawMessage(`{"name":"a"}`), Input: in, Budget: runs.Budget{MaxTokens: 5, MaxCostUSD: 1.5},
		Output: &out, Error: "boom", ChangesAcceptedAt: &now,
		TraceContext: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Conversation: in.String(), CreatedAt: now, UpdatedAt: now, Steps: []runs.Step{st},
		Reviews: []api.AmbiguousCall{{StepID: st.ID, Round: 1, CallID: "c1", Tool: "pay", Arguments: "{}", Worker: "w0"}}}

	for name, pair := range map[string][2]any{"run": {r, r.API()}, "step": {st, st.API()}, "zero run": {runs.Run{}, runs.Run{}.API()}} {
		want, err := json.Marshal(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: API JSON\n%s\nwant\n%s", name, got, want)
		}
	}
	// Every field is set above: a field added to runs.Run but not copied
	// by API() would show as a zero field here.
	for _, v := range []any{r.API(), st.API()} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Errorf("%T.%s is zero", v, rv.Type().Field(i).Name)
			}
		}
	}
	// Fields tagged json:"-" are the store's own (Step.RedactionEpoch),
	// never on the wire.
	wire := func(v any) int {
		n := 0
		for f := range reflect.TypeOf(v).Fields() {
			if f.Tag.Get("json") != "-" {
				n++
			}
		}
		return n
	}
	if wire(runs.Run{}) != wire(api.Run{}) || wire(runs.Step{}) != wire(api.Step{}) {
		t.Error("runs.Run/Step and api.Run/Step have different fields: update API()")
	}
}
