package agent_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
)

// FuzzJournalLoad feeds arbitrary journal entries to a resuming step: it
// must return a result or an error naming the entry, never panic.
func FuzzJournalLoad(f *testing.F) {
	f.Add(1, "", "reply", []byte(`{"Content":"hi"}`))
	f.Add(1, "c1", "start", []byte(`{"tool":"count","arguments":"{}"}`))
	f.Add(1, "c1", "result", []byte(`{"content":"{\"n\":1}"}`))
	f.Add(1, "", "round", []byte(`{"snapshot":"x"}`))
	f.Add(2, "1", "resume", []byte(`{"after_round":1}`))
	f.Add(-1, "c1", "result", []byte(`not json`))
	f.Fuzz(func(t *testing.T, round int, callID, kind string, data []byte) {
		j := &memJournal{entries: []agent.JournalEntry{{Round: round, CallID: callID, Kind: kind, Data: json.RawMessage(data)}}}
		var calls atomic.Int64
		a := journalAgent(&calls, false, &llm.Scripted{Replies: fiveRounds()})
		_, _ = a.Run(context.Background(), userSession(t, "fuzz"), agent.Meta{Journal: j})
		_ = agent.Resumes(j.entries)
		_, _ = agent.LastSnapshot(j.entries)
	})
}
