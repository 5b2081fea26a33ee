package runs_test

import (
	"context"
	"testing"

	"github.com/rath-run/rath/internal/runs"
)

// TestTraceContextKept: the run's traceparent and conversation id are
// recorded with it and read back by every query (the driver's listing, the
// step commit's RETURNING), so a resumed driver or another coordinator
// publishes the run's steps under the same run span.
func TestTraceContextKept(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, url string) {
		ctx := context.Background()
		rs := open(t, url)
		in := version(t, url)
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		r := runs.Run{ID: runs.NewRunID(), Queue: "default", Target: []byte(`{"name":"a"}`), Input: in,
			TraceContext: tp, Conversation: in.String()}
		if err := rs.Create(ctx, &r, []runs.Step{{Input: in}}); err != nil {
			t.Fatal(err)
		}
		got, err := rs.Get(ctx, r.ID)
		if err != nil || got.TraceContext != tp || got.Conversation != in.String() {
			t.Fatalf("Get = %+v, %v; want trace context %s and conversation %s", got, err, tp, in)
		}
		if _, err := rs.StartStep(ctx, r.Steps[0].ID, "w1"); err != nil {
			t.Fatal(err)
		}
		done, err := rs.CommitStep(ctx, r.Steps[0].ID, version(t, url))
		if err != nil || done.TraceContext != tp || done.Conversation != in.String() {
			t.Fatalf("CommitStep = %+v, %v; want the trace context kept", done, err)
		}
	})
}
