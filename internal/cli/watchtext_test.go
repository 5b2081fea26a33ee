package cli

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/api"
)

// Three branches stream at once, their tokens interleaved as a fan-out's
// are: each reply must come out whole, on its own line, before the event
// that ended its step.
func TestStreamTextKeepsConcurrentRepliesWhole(t *testing.T) {
	var out strings.Builder
	s := newStreamText(&out)
	ev := func(typ, step string) {
		s.event(api.Event{Type: typ, StepID: step})
		out.WriteString("[" + typ + " " + step + "]\n")
	}
	ev(api.EventStepStarted, "a")
	ev(api.EventStepStarted, "b")
	ev(api.EventStepStarted, "c")
	s.token("a", "Temples:")
	s.token("b", "Walks: the path.")
	s.token("a", " Kiyomizu-dera.")
	s.token("c", "Food: ")
	ev(api.EventStepCommitted, "b")
	s.token("c", "Nishiki.")
	ev(api.EventStepCommitted, "a")
	s.token("c", " Yudofu.")
	ev(api.EventStepCommitted, "c")
	s.token("d", "held to the end")
	s.token("e", "never ended")
	s.flush()
	got := out.String()
	for _, line := range []string{
		"Temples: Kiyomizu-dera.\n",
		"Walks: the path.\n[step.committed b]\n",
		"Food: Nishiki. Yudofu.\n[step.committed c]\n",
		"held to the end\n",
		"never ended\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("output lacks %q:\n%s", line, got)
		}
	}
	if strings.Index(got, "Temples:") > strings.Index(got, "[step.committed a]") {
		t.Errorf("a's reply printed after its commit:\n%s", got)
	}
}
