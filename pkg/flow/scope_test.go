package flow_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
)

// recorder is a Runtime that records the keys it is asked for and returns
// its input.
type recorder struct{ keys chan string }

func (r recorder) Step(_ context.Context, key string, _ flow.Call, in session.Session) (session.Session, error) {
	r.keys <- key
	return in, nil
}

var keyRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,120}$`)

func TestKeys(t *testing.T) {
	t.Parallel()
	ctx := flow.Root(context.Background())
	if got := []string{flow.NextKey(ctx), flow.NextKey(ctx)}; got[0] != "1" || got[1] != "2" {
		t.Fatalf("root keys %v, want 1 2", got)
	}
	bs := flow.Branches(ctx, 2) // takes key 3
	if got := flow.NextKey(bs[1]); got != "3.b1.1" {
		t.Fatalf("branch 1 first key %q, want 3.b1.1", got)
	}
	if got := flow.NextKey(bs[0]); got != "3.b0.1" {
		t.Fatalf("branch 0 first key %q, want 3.b0.1", got)
	}
	inner := flow.Branches(bs[0], 1)[0] // takes 3.b0.2
	if got := flow.NextKey(inner); got != "3.b0.2.b0.1" {
		t.Fatalf("nested branch key %q, want 3.b0.2.b0.1", got)
	}
	if got := flow.NextKey(ctx); got != "4" {
		t.Fatalf("root key after the fan-out %q, want 4", got)
	}
	if got := flow.NextKey(context.Background()); got != "" {
		t.Fatalf("key without a scope %q, want none", got)
	}
}

// TestLongKeysStayBoundedAndDistinct nests fan-outs until keys would pass
// the limit: they stay within MaxKeyBytes, in the key alphabet, distinct,
// and the same on a second execution.
func TestLongKeysStayBoundedAndDistinct(t *testing.T) {
	t.Parallel()
	walk := func() []string {
		ctx := flow.Root(context.Background())
		var keys []string
		for depth := range 40 {
			bs := flow.Branches(ctx, 2)
			keys = append(keys, flow.NextKey(bs[0]), flow.NextKey(bs[1]))
			ctx = bs[depth%2]
		}
		return keys
	}
	a, b := walk(), walk()
	seen := map[string]bool{}
	for i, k := range a {
		if !keyRE.MatchString(k) {
			t.Fatalf("key %q: want %s", k, keyRE)
		}
		if seen[k] {
			t.Fatalf("key %q taken twice", k)
		}
		seen[k] = true
		if b[i] != k {
			t.Fatalf("second walk key %d = %q, first %q", i, b[i], k)
		}
	}
	if !strings.Contains(a[len(a)-1], "-h") {
		t.Fatalf("deepest key %q was not shortened", a[len(a)-1])
	}
}

func TestDoNeedsRuntime(t *testing.T) {
	t.Parallel()
	g := session.NewMemoryGraph()
	in := mustUser(t, g, "hi")
	if _, err := flow.Do(context.Background(), flow.Call{Kind: flow.KindAgent}, in); err == nil {
		t.Fatal("Do without a runtime succeeded")
	}
	rec := recorder{keys: make(chan string, 4)}
	ctx := flow.WithRuntime(context.Background(), rec)
	for range 2 {
		if _, err := flow.Do(ctx, flow.Call{Kind: flow.KindAgent}, in); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := <-rec.keys, <-rec.keys; a != "1" || b != "2" {
		t.Fatalf("keys %s %s, want 1 2", a, b)
	}
	if _, err := flow.Run(context.Background(), nil, flow.EmptyWorkflow, in); err == nil {
		t.Fatal("Run with a nil runtime succeeded")
	}
}

func TestEmptyIsIdentity(t *testing.T) {
	t.Parallel()
	in := mustUser(t, session.NewMemoryGraph(), "hi")
	out, err := flow.EmptyWorkflow.Forward(context.Background(), in)
	if err != nil || out != in {
		t.Fatalf("Empty returned %v, %v; want the same session", out, err)
	}
	if !flow.IsEmpty(flow.EmptyWorkflow) || !flow.IsEmpty(&flow.Empty{}) || flow.IsEmpty(flow.Sequence{}) {
		t.Fatal("IsEmpty is wrong")
	}
}
