package agent_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/session"
)

// FuzzParseApproval feeds arbitrary approval chunk payloads to the decoder
// the loop trusts to release a gated call: it never panics, and whatever it
// accepts is a valid decision that round-trips through ApprovalChunk.
func FuzzParseApproval(f *testing.F) {
	for _, s := range []string{
		`{"call_id":"c1","tool":"deploy","decision":"approved"}`,
		`{"call_id":"c1","tool":"deploy","decision":"rejected","reason":"no","by":"alice"}`,
		`{"call_id":"c1","tool":"deploy","decision":"APPROVED"}`,
		`{"call_id":"c1","tool":"deploy","decision":"approved","approved":true}`,
		`{"call_id":1}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := session.NewChunk(session.KindApproval, payload)
		if err != nil {
			return
		}
		d, err := agent.ParseApproval(c)
		if err != nil {
			return
		}
		if d.Decision != agent.DecisionApproved && d.Decision != agent.DecisionRejected {
			t.Fatalf("accepted decision %q", d.Decision)
		}
		again, err := agent.ApprovalChunk(d)
		if err != nil {
			t.Fatalf("accepted %+v does not re-encode: %v", d, err)
		}
		if d2, err := agent.ParseApproval(again); err != nil || d2 != d {
			t.Fatalf("round trip: %+v → %+v, %v", d, d2, err)
		}
	})
}
