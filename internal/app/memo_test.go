package app_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/memory"
)

// TestDevMemoExtraction: in the dev stack, an agent with commit and
// extract whose (scripted) model answers with a memo list leaves the
// transcript and one item per memo in memory: local, written by the run's
// output version.
func TestDevMemoExtraction(t *testing.T) {
	ctx := context.Background()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start dev stack: %v", err)
	}
	defer d.Close()
	cl, err := client.New(d.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dev: d, cl: cl}
	const spec = `{"name":"memoist","model":"scripted","memory":{"store":"local","commit":true,"extract":true},"script":[{"content":"[\"The user's favorite color is teal.\",\"The user writes Go.\"]"}]}`
	r := s.waitRun(t, s.submit(t, spec, "My favorite color is teal and I write Go.").ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("run ended %s (%s)", r.Status, r.Error)
	}
	v := r.Output.String()
	items, err := d.Backend.Memory.List(ctx, "", memory.ListOptions{Scope: "memory://session/" + v + "/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{agent.MemoURI(*r.Output, 0), agent.MemoURI(*r.Output, 1), agent.TranscriptURI(*r.Output)}
	if len(items) != len(want) {
		t.Fatalf("items %+v", items)
	}
	for i, it := range items {
		if it.URI != want[i] || it.VersionID != v {
			t.Fatalf("item %d: %+v, want %s written by %s", i, it, want[i], v)
		}
	}
	if items[0].Text != "The user's favorite color is teal." || items[0].Metadata["source"] != "extraction" || items[0].Metadata["agent"] != "memoist" {
		t.Fatalf("memo 0: %+v", items[0])
	}
}
