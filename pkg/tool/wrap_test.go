package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rath-run/rath/pkg/tool"
)

type named struct{ name string }

func (n named) Def() tool.Def {
	return tool.Def{Name: n.name, Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)}
}
func (named) ResourceKey(json.RawMessage) string { return "" }
func (n named) Call(context.Context, tool.Env, json.RawMessage) (any, error) {
	return n.name, nil
}

type counted struct {
	tool.Tool
	calls *int
}

func (c counted) Call(ctx context.Context, env tool.Env, args json.RawMessage) (any, error) {
	*c.calls++
	return c.Tool.Call(ctx, env, args)
}

func TestSetWrap(t *testing.T) {
	t.Parallel()
	set, err := tool.NewSet(named{"b"}, named{"a"})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	w := set.Wrap(func(t tool.Tool) tool.Tool { return counted{Tool: t, calls: &calls} })
	if w.Len() != 2 || w.Defs()[0].Name != "a" {
		t.Fatalf("wrapped set: %d tools, first %q", w.Len(), w.Defs()[0].Name)
	}
	got, ok := w.Get("b")
	if !ok {
		t.Fatal("b missing")
	}
	v, err := got.Call(tool.WithCallID(context.Background(), "c1"), tool.Env{}, json.RawMessage(`{"x":1}`))
	if err != nil || v != "b" || calls != 1 {
		t.Fatalf("call: %v %v, %d calls", v, err, calls)
	}
	if err := w.Validate("a", map[string]any{}); err == nil {
		t.Error("the wrapped set lost its schemas: a call without x validated")
	}
	if orig, _ := set.Get("b"); orig == got {
		t.Error("Wrap changed the original set")
	}
	var nilSet *tool.Set
	if nilSet.Wrap(func(t tool.Tool) tool.Tool { return t }) != nil {
		t.Error("nil set wrapped to non-nil")
	}
	if id := tool.CallID(tool.WithCallID(context.Background(), "call_9")); id != "call_9" {
		t.Errorf("CallID = %q", id)
	}
}
