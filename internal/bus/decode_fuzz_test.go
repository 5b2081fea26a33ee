package bus

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

// FuzzDecodeJob feeds arbitrary job messages (body and version header) to
// the decoder every delivery goes through: it never panics; a message it
// refuses is ErrMalformedJob (the worker terminates it, nothing runs); one
// it accepts is a valid job that re-encodes and decodes to the same job.
func FuzzDecodeJob(f *testing.F) {
	valid := `{"v":1,"step_id":"run_a/0","run_id":"run_a","queue":"default","input":"0199a3a4-7d5c-7000-8000-000000000000","target":{"name":"a"},"created_at":"2026-01-01T00:00:00Z"}`
	for _, s := range []struct{ ver, body string }{
		{"", valid},
		{"1", valid},
		{"2", valid},
		{"", `{"v":1}`},
		{"", `{"v":1,"step_id":"a b","run_id":"r","input":"x","target":{}}`},
		{"", `{"v":1,"step_id":"s","run_id":"r","queue":"UPPER","input":"0199a3a4-7d5c-7000-8000-000000000000","target":{},"created_at":"2026-01-01T00:00:00Z"}`},
		{"", `{"v":1,"step_id":"s","run_id":"r","input":"0199a3a4-7d5c-7000-8000-000000000000","target":"","created_at":"2026-01-01T00:00:00Z"}`},
		{"", `[]`},
		{"", `{"v":1,"budget":{"max_tokens":-1}}`},
		{"x", ``},
	} {
		f.Add(s.ver, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, ver string, body []byte) {
		hdr := nats.Header{}
		if ver != "" {
			hdr.Set(HeaderJobVersion, ver)
		}
		job, err := decodeJob(hdr, body)
		if err != nil {
			if !errors.Is(err, ErrMalformedJob) {
				t.Fatalf("refusal %v is not ErrMalformedJob", err)
			}
			return
		}
		if err := job.validate(); err != nil {
			t.Fatalf("accepted an invalid job: %v", err)
		}
		again, err := decodeJob(nats.Header{HeaderJobVersion: {strconv.Itoa(JobVersion)}}, mustMarshal(t, job))
		if err != nil || again.StepID != job.StepID || again.Input != job.Input || string(again.Target) != string(job.Target) {
			t.Fatalf("round trip: %+v, %v", again, err)
		}
	})
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzLiveEvent feeds arbitrary subjects and bodies to the reader of the
// events a core subscription hands over: it never panics; a subject it
// accepts is exactly the subject of the run and type it read, and
// decoding the body either fails with an error or yields that run and type.
func FuzzLiveEvent(f *testing.F) {
	f.Add("rath.events.run_a.step.committed", []byte(`{"run_id":"run_a","step_id":"run_a/0","type":"step.committed","time":"2026-01-01T00:00:00Z"}`))
	f.Add("rath.events.run_a.run.succeeded", []byte(`{}`))
	f.Add("rath.events.run_a", []byte(`{}`))
	f.Add("rath.events..step.committed", []byte(`[]`))
	f.Add("rath.jobs.default", []byte(`{`))
	f.Add("rath.events.run a.step..x", []byte(`{"run_id":1}`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		e, err := liveEvent(subject, data)
		if err != nil {
			return
		}
		if got := EventSubject(e.RunID, e.Type); got != subject {
			t.Fatalf("subject %q read as run %q type %q, whose subject is %q", subject, e.RunID, e.Type, got)
		}
		ev, err := e.Decode()
		if err == nil && (ev.RunID != e.RunID || ev.Type != e.Type) {
			t.Fatalf("decoded %+v, want run %q type %q", ev, e.RunID, e.Type)
		}
	})
}

// FuzzDecodeEvents feeds arbitrary subjects and bodies to the decoder of
// the events stream's messages (watches, replays, live subscriptions and
// the bench read every message through it): it never panics; what it
// accepts is at least one event, and a batch it accepts is all the
// subject's run's and ends with the subject's type.
func FuzzDecodeEvents(f *testing.F) {
	f.Add("rath.events.run_a.step.committed", []byte(`{"run_id":"run_a","type":"step.committed"}`))
	f.Add("rath.events.run_a.run.completed", []byte(`[{"run_id":"run_a","type":"step.started"},{"run_id":"run_a","type":"run.completed"}]`))
	f.Add("rath.events.run_a.run.completed", []byte(`[{"run_id":"run_b","type":"run.completed"}]`))
	f.Add("rath.events.run_a.step.committed", []byte(` []`))
	f.Add("rath.events.run_a", []byte(`[{}]`))
	f.Add("rath.jobs.default", []byte(`[`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		es, err := DecodeEvents(subject, data)
		if err != nil {
			if es != nil {
				t.Fatalf("refused (%v) but returned %d events", err, len(es))
			}
			return
		}
		if len(es) == 0 {
			t.Fatal("accepted a message of no events")
		}
		if !isBatch(data) {
			return
		}
		le, err := liveEvent(subject, nil)
		if err != nil {
			t.Fatalf("accepted a batch on %q, not an event subject: %v", subject, err)
		}
		for i, e := range es {
			if e.RunID != le.RunID {
				t.Fatalf("event %d of run %q accepted on %q", i, e.RunID, subject)
			}
		}
		if last := es[len(es)-1].Type; last != le.Type {
			t.Fatalf("a batch ending with %q accepted on %q", last, subject)
		}
	})
}
