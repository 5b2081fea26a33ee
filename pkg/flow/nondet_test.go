package flow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

func TestStepDigest(t *testing.T) {
	in1 := session.ID{1}
	in2 := session.ID{2}
	call := flow.Call{Kind: flow.KindAgent, Agent: agent.Spec{Name: "a", Model: "m", Instructions: "be brief"}}
	d := func(c flow.Call, in session.ID) string {
		t.Helper()
		s, err := flow.StepDigest(c, in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, "sha256:") || len(s) != len("sha256:")+64 {
			t.Fatalf("digest %q: want sha256:<64 hex>", s)
		}
		return s
	}
	base := d(call, in1)
	if again := d(call, in1); again != base {
		t.Fatalf("digest not stable: %s, %s", base, again)
	}
	changed := call
	changed.Agent.Instructions = "be verbose"
	sel := flow.Call{Kind: flow.KindSelect, Agent: call.Agent, Candidates: []string{"x", "y"}}
	selOther := sel
	selOther.Candidates = []string{"y", "x"}
	comp := flow.Call{Kind: flow.KindCompress, Agent: call.Agent, Instruction: "sum up"}
	compOther := comp
	compOther.Instruction = "sum up briefly"
	for name, other := range map[string]string{
		"input":       d(call, in2),
		"spec":        d(changed, in1),
		"kind":        d(sel, in1),
		"candidates":  d(selOther, in1),
		"instruction": d(compOther, in1),
	} {
		if other == base {
			t.Errorf("a changed %s keeps the digest", name)
		}
	}
	if d(sel, in1) == d(selOther, in1) || d(comp, in1) == d(compOther, in1) {
		t.Error("candidates or instruction order not covered")
	}
}

func TestCheckDigest(t *testing.T) {
	if err := flow.CheckDigest("k", "", "sha256:b"); err != nil {
		t.Fatalf("no recorded digest: %v", err)
	}
	if err := flow.CheckDigest("k", "sha256:a", "sha256:a"); err != nil {
		t.Fatalf("same digest: %v", err)
	}
	err := flow.CheckDigest("0.2", "sha256:a", "sha256:b")
	if !errors.Is(err, flow.ErrNondeterministic) {
		t.Fatalf("changed digest = %v, want ErrNondeterministic", err)
	}
	var nd *flow.NondeterministicError
	if !errors.As(err, &nd) || nd.Key != "0.2" || nd.Recorded != "sha256:a" || nd.New != "sha256:b" {
		t.Fatalf("error = %#v", err)
	}
	for _, want := range []string{"step 0.2", "sha256:a", "sha256:b", "--accept-changes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}
