package flow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
)

func TestParseTarget(t *testing.T) {
	t.Parallel()
	spec := `{"name":"a","model":"scripted","script":["hi"]}`
	many := make([]string, flow.MaxCandidates+1)
	for i := range many {
		many[i] = fmt.Sprintf("candidate %d", i)
	}
	manyJSON, _ := json.Marshal(many)
	tests := []struct {
		name, in string
		kind     flow.Kind
		wantErr  string // substring; "" means success
	}{
		{"bare spec", spec, flow.KindAgent, ""},
		{"agent envelope", `{"kind":"agent","agent":` + spec + `}`, flow.KindAgent, ""},
		{"select", `{"kind":"select","agent":` + spec + `,"candidates":["x","y"]}`, flow.KindSelect, ""},
		{"compress", `{"kind":"compress","agent":` + spec + `,"instruction":"short"}`, flow.KindCompress, ""},
		{"empty", ``, "", "target is empty"},
		{"unknown kind", `{"kind":"dance","agent":` + spec + `}`, "", "kind"},
		{"no agent", `{"kind":"select","candidates":["x"]}`, "", "agent: required"},
		{"bad agent", `{"kind":"agent","agent":{"name":"A B","model":"m"}}`, "", "name"},
		{"bad bare spec", `{"name":"a"}`, "", "model"},
		{"unknown field", `{"kind":"agent","agent":` + spec + `,"extra":1}`, "", "extra"},
		{"select without candidates", `{"kind":"select","agent":` + spec + `}`, "", "candidates"},
		{"too many candidates", `{"kind":"select","agent":` + spec + `,"candidates":` + string(manyJSON) + `}`, "", "limit 64"},
		{"blank candidate", `{"kind":"select","agent":` + spec + `,"candidates":["x"," "]}`, "", "candidates[1]"},
		{"candidates on agent", `{"kind":"agent","agent":` + spec + `,"candidates":["x"]}`, "", "candidates"},
		{"instruction on select", `{"kind":"select","agent":` + spec + `,"candidates":["x"],"instruction":"i"}`, "", "instruction"},
		{"trailing", `{"kind":"agent","agent":` + spec + `} {}`, "", ""},
		{"not an object", `[1]`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := flow.ParseTarget(json.RawMessage(tc.in))
			switch {
			case tc.kind != "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.kind != "" && c.Kind != tc.kind:
				t.Fatalf("kind %s, want %s", c.Kind, tc.kind)
			case tc.kind == "" && err == nil:
				t.Fatalf("accepted %s", tc.in)
			case tc.kind == "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q does not mention %q", err, tc.wantErr)
			case tc.kind == "" && !errors.Is(err, flow.ErrInvalidCall) && !errors.Is(err, agent.ErrInvalidSpec):
				t.Fatalf("error %v wraps neither ErrInvalidCall nor ErrInvalidSpec", err)
			}
		})
	}
}

// TestCallRoundTrip: a Call marshals to a target ParseTarget reads back.
func TestCallRoundTrip(t *testing.T) {
	t.Parallel()
	c := flow.Call{Kind: flow.KindSelect, Agent: scriptedSpec("r", "0"), Candidates: []string{"a", "b"}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := flow.ParseTarget(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != c.Kind || got.Agent.Name != "r" || len(got.Candidates) != 2 {
		t.Fatalf("round trip %+v", got)
	}
}

func FuzzParseTarget(f *testing.F) {
	spec := `{"name":"a","model":"scripted","script":["hi"]}`
	for _, s := range []string{
		spec,
		`{"kind":"select","agent":` + spec + `,"candidates":["x","y"]}`,
		`{"kind":"compress","agent":` + spec + `,"instruction":"short"}`,
		`{"kind":"agent","agent":null}`,
		`{"kind":1}`, `name: a`, `[]`, `{}`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := flow.ParseTarget(b)
		if err != nil {
			if !errors.Is(err, flow.ErrInvalidCall) && !errors.Is(err, agent.ErrInvalidSpec) {
				t.Fatalf("error %v wraps neither ErrInvalidCall nor ErrInvalidSpec", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed call does not validate: %v", err)
		}
		// What parses re-encodes to a target that parses the same way.
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := flow.ParseTarget(enc)
		if err != nil {
			t.Fatalf("re-encoded call %s: %v", enc, err)
		}
		if again.Kind != c.Kind || len(again.Candidates) != len(c.Candidates) || again.Instruction != c.Instruction {
			t.Fatalf("round trip changed the call: %+v → %+v", c, again)
		}
	})
}
