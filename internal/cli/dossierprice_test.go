package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app/apptest"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/api"
)

// TestDossierPricesFromTheSpec: a run whose agent spec has a pricing block
// gets a priced dossier without --price, through the server and the store;
// --price still overrides the spec.
func TestDossierPricesFromTheSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "rath.db")
	d := apptest.Dev(t, dir)
	spec := json.RawMessage(`{"name":"priced","model":"scripted","script":[{"content":"a priced answer"}],
		"pricing":{"input_per_mtok":1000000,"output_per_mtok":2000000}}`)
	run, err := d.Coordinator.Submit(ctx, api.SubmitRequest{Agent: spec, Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "run to end", func() bool {
		run, err = d.Backend.Runs.Get(ctx, run.ID)
		return err == nil && run.Status.Terminal()
	})
	if run.Status != runs.RunSucceeded {
		t.Fatalf("run ended %s: %s", run.Status, run.Error)
	}
	for name, flags := range map[string][]string{"server": {"--server", d.URL}, "store": {"--store", "sqlite:" + db}} {
		t.Run(name, func(t *testing.T) {
			var dos api.Dossier
			okJSON(t, &dos, with(flags, "dossier", run.ID)...)
			if len(dos.Usage) != 1 {
				t.Fatalf("usage rows = %+v", dos.Usage)
			}
			u := dos.Usage[0]
			// 1 USD per prompt token, 2 per completion token.
			if want := float64(u.PromptTokens) + 2*float64(u.CompletionTokens); u.TotalTokens == 0 || u.CostUSD != want {
				t.Errorf("cost without --price = %g for %+v, want %g (the spec's pricing)", u.CostUSD, u, want)
			}
			var over api.Dossier
			okJSON(t, &over, with(flags, "dossier", run.ID, "--price", "scripted=0/0")...)
			if len(over.Usage) != 1 || over.Usage[0].CostUSD != 0 {
				t.Errorf("usage with --price scripted=0/0 = %+v, want cost 0 (--price overrides the spec)", over.Usage)
			}
		})
	}
}
