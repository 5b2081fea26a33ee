package agent_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
)

func TestSpecLimitsAndPricing(t *testing.T) {
	t.Parallel()
	s, err := agent.ParseSpec([]byte(`
name: a
model: gpt-x
tools: [builtin]
limits: {max_tool_rounds: 3, max_tokens: 900, max_cost_usd: 0.5, tool_timeout_seconds: 5}
pricing: {input_per_mtok: 0.15, output_per_mtok: 0.6}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Limits.MaxCostUSD != 0.5 || s.Limits.ToolTimeoutSeconds != 5 || s.Pricing.OutputPerMTok != 0.6 {
		t.Fatalf("%+v %+v", s.Limits, s.Pricing)
	}
	for _, tc := range []struct{ doc, field string }{
		{`{name: a, model: m, limits: {max_cost_usd: -1}}`, "limits.max_cost_usd"},
		{`{name: a, model: m, limits: {max_cost_usd: 1}}`, "limits.max_cost_usd: a cost budget needs pricing"},
		{`{name: a, model: m, limits: {tool_timeout_seconds: -2}}`, "limits.tool_timeout_seconds"},
		{`{name: a, model: m, limits: {tool_timeout_seconds: 1e9}}`, "limits.tool_timeout_seconds"},
		{`{name: a, model: m, pricing: {input_per_mtok: -1}}`, "pricing.input_per_mtok"},
		{`{name: a, model: m, pricing: {output_per_mtok: -1}}`, "pricing.output_per_mtok"},
		{`{name: a, model: m, pricing: {per_token: 1}}`, "per_token"},
		{`{name: a, model: m, tools: [""]}`, "tools[0]"},
		{`{name: a, model: m, params: {extra: {stream: false}}}`, "params.extra.stream"},
	} {
		_, err := agent.ParseSpec([]byte(tc.doc))
		if !errors.Is(err, agent.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err %v, want it to name %s", tc.doc, err, tc.field)
		}
	}
}

// A scripted reply's latency jitter may not exceed its delay, whether the
// spec is written in YAML or built in Go.
func TestSpecScriptJitter(t *testing.T) {
	t.Parallel()
	s, err := agent.ParseSpec([]byte(`{name: a, model: scripted, script: [{content: hi, delay_ms: 500, delay_jitter_ms: 100}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Script[0].DelayJitterMS != 100 {
		t.Fatalf("script[0] = %+v", s.Script[0])
	}
	if _, err := agent.ParseSpec([]byte(`{name: a, model: scripted, script: [{content: hi, delay_ms: 5, delay_jitter_ms: 6}]}`)); err == nil || !strings.Contains(err.Error(), "delay_jitter_ms") {
		t.Errorf("jitter over the delay in YAML: err %v, want it to name delay_jitter_ms", err)
	}
	s.Script[0].DelayJitterMS = 501
	if err := s.Validate(); !errors.Is(err, agent.ErrInvalidSpec) || !strings.Contains(err.Error(), "script[0].delay_jitter_ms") {
		t.Errorf("jitter over the delay in Go: err %v, want it to name script[0].delay_jitter_ms", err)
	}
}
