package telemetry_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rath-run/rath/internal/telemetry"
)

// exported returns the names of the series Rath's processes export.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	telemetry.NewMetrics(reg)
	pending := func(context.Context) (uint64, uint64, error) { return 0, 0, nil }
	if err := telemetry.RegisterQueueLag(reg, "default", pending); err != nil {
		t.Fatal(err)
	}
	if err := telemetry.RegisterActiveRuns(reg, func(context.Context) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

// TestGrafanaDashboard checks deploy/grafana/rath-dashboard.json parses as
// a dashboard and every query names only series Rath exports.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "rath-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard lacks title, uid or panels: %+v", d)
	}
	names := exported(t)
	used := map[string]bool{}
	series := regexp.MustCompile(`\brath_[a-z_]+`)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeats", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			found := series.FindAllString(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: %q names no rath_ series", p.Title, tg.Expr)
			}
			for _, s := range found {
				base := s
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(s, suf); ok && names[b] {
						base = b
					}
				}
				if !names[base] {
					t.Errorf("panel %q: %s is not a series Rath exports", p.Title, s)
				}
				used[base] = true
			}
		}
	}
	for n := range names {
		if !used[n] {
			t.Errorf("series %s is on no panel", n)
		}
	}
}
