package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rath-run/rath/internal/telemetry"
	"github.com/rath-run/rath/pkg/llm"
)

// fixedModel answers every call, reporting model as the response's model.
type fixedModel struct{ model string }

func (f fixedModel) Chat(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{Model: f.model}, nil
}

// TestModelLabelsBounded: only models the operator configured (and
// scripted) get a label of their own; any other model, however many
// distinct ones tenants send, is counted under "other".
func TestModelLabelsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	m.KnownModels("gpt-4o-mini", "bad name", strings.Repeat("x", 200))
	p := telemetry.TracedProvider(fixedModel{strings.Repeat("r", 10_000)}, noop.NewTracerProvider(), m, "openai")
	for _, model := range []string{"gpt-4o-mini", "scripted", "tenant-a", "tenant-b", "gpt-4o-mini"} {
		if _, err := p.Chat(context.Background(), llm.Request{Model: model}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, err := p.Chat(context.Background(), llm.Request{Model: fmt.Sprintf("valid-but-unknown-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	m.StepCost("tenant-c", 0.5)
	m.StepCost("gpt-4o-mini", 0.25)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "rath_model_calls_total" && f.GetName() != "rath_model_cost_usd_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() != "model" {
					continue
				}
				if labels[f.GetName()] == nil {
					labels[f.GetName()] = map[string]float64{}
				}
				labels[f.GetName()][l.GetValue()] += mt.GetCounter().GetValue()
			}
		}
	}
	calls := labels["rath_model_calls_total"]
	if len(calls) != 3 || calls["gpt-4o-mini"] != 2 || calls["scripted"] != 1 || calls[telemetry.OtherModel] != 102 {
		t.Errorf("rath_model_calls_total by model = %v, want gpt-4o-mini 2, scripted 1, other 102", calls)
	}
	cost := labels["rath_model_cost_usd_total"]
	if len(cost) != 2 || cost[telemetry.OtherModel] != 0.5 || cost["gpt-4o-mini"] != 0.25 {
		t.Errorf("rath_model_cost_usd_total by model = %v", cost)
	}
}

func TestModelLabelDefaults(t *testing.T) {
	t.Parallel()
	var nilMetrics *telemetry.Metrics
	m := telemetry.NewMetrics(prometheus.NewRegistry())
	for _, c := range []struct {
		m           *telemetry.Metrics
		model, want string
	}{
		{m, "scripted", "scripted"},
		{m, "gpt-4o", telemetry.OtherModel}, // nothing configured yet
		{nilMetrics, "gpt-4o", telemetry.OtherModel},
	} {
		if got := c.m.ModelLabel(c.model); got != c.want {
			t.Errorf("ModelLabel(%q) = %q, want %q", c.model, got, c.want)
		}
	}
	names := make([]string, 0, 2*telemetry.MaxKnownModels)
	for i := range 2 * telemetry.MaxKnownModels {
		names = append(names, fmt.Sprintf("m-%d", i))
	}
	m.KnownModels(names...)
	known := 0
	for _, n := range names {
		if m.ModelLabel(n) == n {
			known++
		}
	}
	if known >= telemetry.MaxKnownModels {
		t.Errorf("%d models labeled, want fewer than %d (with scripted)", known, telemetry.MaxKnownModels)
	}
	if got := telemetry.CapModel(strings.Repeat("é", 200)); len(got) > llm.MaxModelBytes+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("CapModel: %d bytes %q", len(got), got)
	}
}

// TestToolLabelsBounded: an MCP tool's name carries the spec's server
// name, so MCP calls share one label; the worker's own tools keep theirs.
func TestToolLabelsBounded(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"write_workspace_file": "write_workspace_file",
		"run_shell_command":    "run_shell_command",
		"files__read":          telemetry.MCPToolLabel,
		"tenant-x1__search":    telemetry.MCPToolLabel,
	} {
		if got := telemetry.ToolLabel(name); got != want {
			t.Errorf("ToolLabel(%q) = %q, want %q", name, got, want)
		}
	}
}
