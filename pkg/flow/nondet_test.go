package flow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

func TestStepDigest(t *testing.T) {
	in1, in2 := "content:1", "content:2"
	call := flow.Call{Kind: flow.KindAgent, Agent: agent.Spec{Name: "a", Model: "m", Instructions: "be brief"}}
	d := func(c flow.Call, in string) string {
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

// TestInputIdentity: versions a re-executed workflow makes anew (forks,
// appends, with new ids) have the identity of their content; keyed ones
// (step outputs, fan-in merges) of their id.
func TestInputIdentity(t *testing.T) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	root, err := session.FromUserMessage(ctx, g, "hi")
	if err != nil {
		t.Fatal(err)
	}
	id := func(s session.Session) string {
		t.Helper()
		got, err := flow.InputIdentity(ctx, g, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	must := func(s session.Session, err error) session.Session {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f1, f2 := must(root.Fork(ctx)), must(root.Fork(ctx))
	if f1.ID() == f2.ID() || id(f1) != id(f2) {
		t.Fatalf("two forks of one version: identities %s, %s; want equal", id(f1), id(f2))
	}
	a1 := must(f1.Append(ctx, session.User("more")))
	a2 := must(f2.Append(ctx, session.User("more")))
	if id(a1) != id(a2) {
		t.Fatal("the same message appended to two forks: identities differ")
	}
	if b := must(f2.Append(ctx, session.User("other"))); id(b) == id(a1) {
		t.Fatal("other messages appended: identities equal")
	}
	other := must(session.FromUserMessage(ctx, g, "bye"))
	if id(must(other.Fork(ctx))) == id(f1) {
		t.Fatal("forks of different roots: identities equal")
	}
	m := must(a1.MergeKeyed(ctx, a2, "merge-key"))
	if got := id(m); got != "version:"+m.ID().String() {
		t.Fatalf("keyed version identity = %s, want its id", got)
	}
	if id(must(m.Fork(ctx))) == id(must(a1.Fork(ctx))) {
		t.Fatal("forks of different keyed versions: identities equal")
	}
	if _, err := flow.InputIdentity(ctx, g, session.ID{9}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("identity of no version = %v, want ErrNotFound", err)
	}
}
