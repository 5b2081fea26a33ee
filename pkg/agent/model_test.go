package agent_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
)

// TestParseSpecModelNames: a spec's model and provider are bounded names,
// never paths; the error names the field and the limit or the allowed
// characters, and does not echo an over-long name.
func TestParseSpecModelNames(t *testing.T) {
	t.Parallel()
	spec := func(fields map[string]any) []byte {
		m := map[string]any{"name": "a"}
		for k, v := range fields {
			m[k] = v
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, fields := range []map[string]any{
		{"model": "gpt-4o-mini"},
		{"model": "meta-llama/Llama-3.1-8B-Instruct", "provider": "local"},
		{"model": "scripted:replies.yaml"},
		{"model": "scripted", "script": []string{"x"}},
	} {
		if _, err := agent.ParseSpec(spec(fields)); err != nil {
			t.Errorf("%v: %v", fields, err)
		}
	}
	for _, c := range []struct {
		fields map[string]any
		want   string
	}{
		{map[string]any{"model": strings.Repeat("x", 900001)}, "model: 900001 bytes, over the 128-byte limit"},
		{map[string]any{"model": "scripted:/etc/hostname"}, "model: \"scripted:/etc/hostname\": a scripted model's script is a file name"},
		{map[string]any{"model": "scripted:../x.yaml"}, "not a path"},
		{map[string]any{"model": "gpt\n4o"}, "model: \"gpt\\n4o\": a model name is letters, digits"},
		{map[string]any{"model": "gpt-4o", "provider": strings.Repeat("p", 100)}, "provider: 100 bytes, over the 64-byte limit"},
		{map[string]any{"model": "gpt-4o", "provider": "../etc"}, "provider: \"../etc\""},
	} {
		_, err := agent.ParseSpec(spec(c.fields))
		if !errors.Is(err, agent.ErrInvalidSpec) || !errors.Is(err, llm.ErrInvalidName) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60v: %.300v, want %q", c.fields, err, c.want)
		}
		if err != nil && len(err.Error()) > 600 {
			t.Errorf("%.60v: a %d-byte error", c.fields, len(err.Error()))
		}
	}
}
