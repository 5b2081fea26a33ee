package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// TestBadInputCatalogJobs puts bad job messages straight on the jobs
// stream of a dev stack (embedded NATS JetStream, a store, the
// coordinator and two in-process workers), past the coordinator's
// Publish checks, as a foreign or broken publisher would: a missing or
// wrong version header, a body that is not JSON, a future envelope, one
// with fields missing, one over MaxJobSize, and a well-formed job for a
// step no run has. Each must be delivered and terminated by a worker (not
// NAKed to be retried, not left on the work queue), and nothing recorded:
// the counts of versions and runs do not change. A body over the stream's message limit
// is refused at publish. Afterwards a real run still succeeds.
// docs/RELIABILITY.md ("Bad input") lists the catalog.
func TestBadInputCatalogJobs(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	js := s.dev.Backend.Bus.JetStream()
	subj := bus.JobSubject(bus.DefaultQueue)
	input := session.NewID().String()
	job := func(step, extra string) string {
		return `{"v":1,"step_id":"` + step + `","run_id":"run_bad","queue":"default","input":"` + input +
			`","target":{"agent":{"name":"a","model":"scripted","script":["x"]}},"created_at":"2026-01-01T00:00:00Z"` + extra + `}`
	}
	cases := []struct {
		name, version, body string
	}{
		{"no header, not JSON", "", "not json at all"},
		{"empty body", "", ""},
		{"wrong version header", "9", job("bad_hdr/0", "")},
		{"non-numeric version header", "one", job("bad_hdr2/0", "")},
		{"future envelope", "", strings.Replace(job("future/0", ""), `"v":1`, `"v":2`, 1)},
		{"fields missing", "1", `{"v":1,"step_id":"x"}`},
		{"bad input id", "1", strings.Replace(job("bad_input/0", ""), input, "nope", 1)},
		{"truncated envelope", "1", job("cut/0", "")[:60]},
		{"over MaxJobSize", "1", job("big/0", `,"pad":"`+strings.Repeat("x", bus.MaxJobSize)+`"`)},
		{"unknown step", "1", job("run_unknown/0", "")},
	}
	counts := func() (int, int) {
		page, err := s.dev.Backend.Store.List(ctx, store.ListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.dev.Backend.Runs.List(ctx, runs.ListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Versions), len(rs)
	}
	v0, r0 := counts()
	var last uint64
	for i, c := range cases {
		m := nats.NewMsg(subj)
		m.Data = []byte(c.body)
		m.Header.Set(nats.MsgIdHdr, "bad-"+string(rune('a'+i)))
		if c.version != "" {
			m.Header.Set(bus.HeaderJobVersion, c.version)
		}
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("%s: publish: %v", c.name, err)
		}
		last = ack.Sequence
	}
	// Over the stream's limit (MaxJobSize plus 64 KiB of headroom): refused
	// by JetStream, so no worker ever sees it.
	huge := nats.NewMsg(subj)
	huge.Data = []byte(job("huge/0", `,"pad":"`+strings.Repeat("x", bus.MaxJobSize+128<<10)+`"`))
	if _, err := js.PublishMsg(ctx, huge); err == nil {
		t.Errorf("a %d-byte job was accepted by the jobs stream", len(huge.Data))
	}

	cons, err := js.Consumer(ctx, bus.JobsStream, bus.ConsumerName(bus.DefaultQueue))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "every bad job delivered and terminated", func() bool {
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatalf("consumer info: %v", err)
		}
		return ci.Delivered.Stream >= last && ci.NumAckPending == 0 && ci.NumPending == 0
	})
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Terminated, not NAKed: a NAKed job would come back up to MaxDeliver
	// times and then stay on the work queue (checked below). A delivery
	// whose Term was lost (the worker does not wait for the server to
	// confirm it) comes back once after AckWait; seen under heavy load, so
	// counted, not failed.
	if ci.Delivered.Consumer < uint64(len(cases)) {
		t.Errorf("%d deliveries of %d bad jobs", ci.Delivered.Consumer, len(cases))
	}
	if extra := ci.Delivered.Consumer - uint64(len(cases)); extra > 0 {
		t.Logf("%d bad jobs delivered again after AckWait", extra)
	}
	st, err := js.Stream(ctx, bus.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d bad jobs left on the work queue", info.State.Msgs)
	}
	if v1, r1 := counts(); v1 != v0 || r1 != r0 {
		t.Errorf("bad jobs recorded something: versions %d → %d, runs %d → %d", v0, v1, r0, r1)
	}

	// The workers are not wedged: a real run goes through.
	r := s.submit(t, scriptedSpec, "hi")
	if got := s.waitRun(t, r.ID); got.Status != runs.RunSucceeded {
		t.Fatalf("run after the bad jobs: %s (%s)", got.Status, got.Error)
	}
}
