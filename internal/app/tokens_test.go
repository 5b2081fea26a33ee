package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// TestTokenEventsCoalesce: a model streaming a delta per word reaches a
// watcher as a few step.token events that hold the same text, all before
// the step's commit (each event is a message JetStream stores: a delta
// each was 300 messages for a 300-word reply); a reply streamed over time
// still reaches it in parts.
func TestTokenEventsCoalesce(t *testing.T) {
	t.Parallel()
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = fmt.Sprintf("w%d", i)
		}
		return strings.Join(w, " ")
	}
	fast, slow := text(300), text(40)
	srv := llmtest.NewServer(t)
	srv.Enqueue(llmtest.Reply{Content: fast}, llmtest.Reply{Content: slow, ChunkDelay: 10 * time.Millisecond})
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL()}
	s := startDev(t, "", app.DevConfig{Workers: 1, Getenv: func(k string) string { return env[k] }})
	ctx := context.Background()

	// watch runs one agent run and returns its streamed text and its
	// step.token events.
	watch := func(t *testing.T) (string, int) {
		t.Helper()
		r := s.submit(t, `{"name":"talker","model":"gpt-test","instructions":"Talk."}`, "hi")
		var got strings.Builder
		tokens, committed := 0, false
		if err := s.cl.Watch(ctx, r.ID, func(e api.Event) error {
			switch e.Type {
			case "step.token":
				if committed {
					t.Errorf("step.token after step.committed")
				}
				tokens++
				var d struct{ Text string }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Errorf("step.token data %s: %v", e.Data, err)
				}
				got.WriteString(d.Text)
			case "step.committed":
				committed = true
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if r = s.waitRun(t, r.ID); r.Status != runs.RunSucceeded {
			t.Fatalf("run %s: %s", r.Status, r.Error)
		}
		return got.String(), tokens
	}

	got, n := watch(t)
	t.Logf("300 deltas at once: %d step.token events", n)
	if got != fast {
		t.Fatalf("streamed text differs from the reply:\n got %.80q…\nwant %.80q…", got, fast)
	}
	if n < 1 || n > 30 {
		t.Fatalf("300 deltas at once became %d step.token events, want 1–30", n)
	}

	got, n = watch(t)
	t.Logf("40 deltas over ~400 ms: %d step.token events", n)
	if got != slow {
		t.Fatalf("streamed text differs from the reply:\n got %q\nwant %q", got, slow)
	}
	if n < 2 || n > 20 {
		t.Fatalf("40 deltas 10 ms apart became %d step.token events, want 2–20: the text streams in parts, fewer than its deltas", n)
	}
}
