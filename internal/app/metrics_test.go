package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
)

// scrape reads the stack's /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of name whose labels include
// labels, and whether it exists. Histograms give their sample count.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsAfterRun scrapes the dev stack's /metrics after a run with
// a tool call and checks the series and their values.
func TestMetricsAfterRun(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: 1})
	r := s.waitRun(t, s.submit(t, tracedToolSpec, "Keep my plan.").ID)
	if r.Status != runs.RunSucceeded {
		t.Fatalf("run ended %s: %s", r.Status, r.Error)
	}
	var fams map[string]*dto.MetricFamily
	// The worker counts the step once it has acked, just after the run
	// reads as succeeded.
	testenv.Eventually(t, 10*time.Second, "the committed step to be counted", func() bool {
		fams = scrape(t, s.dev.URL)
		v, _ := value(fams, "rath_steps_committed_total", map[string]string{"queue": "default"})
		return v == 1
	})
	// One scrape more: a registry gathers its collectors concurrently, so
	// the scrape that saw the count may have read the queue's gauges and
	// the step's duration before the worker's ack and observation, which
	// come before the count.
	fams = scrape(t, s.dev.URL)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rath_steps_started_total", map[string]string{"queue": "default"}, 1},
		{"rath_step_duration_seconds", map[string]string{"queue": "default", "outcome": "committed"}, 1},
		{"rath_model_calls_total", map[string]string{"model": "scripted", "outcome": "ok"}, 2},
		{"rath_model_call_duration_seconds", map[string]string{"model": "scripted"}, 2},
		{"rath_tool_calls_total", map[string]string{"tool": "write_workspace_file", "outcome": "ok"}, 1},
		{"rath_tool_call_duration_seconds", map[string]string{"tool": "write_workspace_file"}, 1},
		{"rath_sandbox_calls_total", map[string]string{"op": "write_file", "outcome": "ok"}, 1},
		{"rath_runs_submitted_total", nil, 1},
		{"rath_queue_pending_jobs", map[string]string{"queue": "default"}, 0},
		{"rath_queue_unacked_jobs", map[string]string{"queue": "default"}, 0},
		{"rath_active_runs", nil, 0},
	} {
		got, ok := value(fams, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if v, ok := value(fams, "rath_steps_redelivered_total", nil); ok && v != 0 {
		t.Errorf("rath_steps_redelivered_total = %v, want 0", v)
	}
	in, _ := value(fams, "rath_model_tokens_total", map[string]string{"model": "scripted", "type": "input"})
	out, _ := value(fams, "rath_model_tokens_total", map[string]string{"model": "scripted", "type": "output"})
	if in <= 0 || out <= 0 {
		t.Errorf("rath_model_tokens_total input %v output %v, want both > 0", in, out)
	}
	if v, _ := value(fams, "rath_http_requests_total", map[string]string{"method": "post", "code": "201"}); v != 1 {
		t.Errorf("rath_http_requests_total{method=post,code=201} = %v, want 1", v)
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("the registry lacks the Go runtime collector")
	}
}
