package agent_test

import (
	"testing"

	"github.com/rath-run/rath/pkg/agent"
)

// FuzzParseReview feeds arbitrary review data (a journal entry's, or a
// review chunk's payload) to the decoder the loop trusts to run, skip or
// fail an ambiguous call: it never panics, and whatever it accepts is a
// valid review that round-trips through ReviewChunk.
func FuzzParseReview(f *testing.F) {
	for _, s := range []string{
		`{"call_id":"c1","tool":"pay","round":1,"decision":"retry"}`,
		`{"call_id":"c1","tool":"pay","round":2,"decision":"skip","result":{"ok":true},"by":"alice"}`,
		`{"call_id":"c1","tool":"pay","round":1,"decision":"fail","reason":"paid already"}`,
		`{"call_id":"c1","tool":"pay","round":1,"decision":"skip"}`,
		`{"call_id":"c1","tool":"pay","round":0,"decision":"retry"}`,
		`{"call_id":"c1","tool":"pay","round":1,"decision":"retry","extra":1}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := agent.ParseReview(raw)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid review %+v: %v", r, err)
		}
		c, err := agent.ReviewChunk(r)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", r, err)
		}
		again, err := agent.ParseReview(c.Payload())
		if err != nil || again.CallID != r.CallID || again.Decision != r.Decision || again.Round != r.Round ||
			again.Reason != r.Reason || again.By != r.By || (len(r.Result) > 0) != (len(again.Result) > 0) {
			t.Fatalf("round trip: %+v → %+v, %v", r, again, err)
		}
	})
}
