package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flow/cluster"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// BenchmarkClusterStep measures the cluster runtime's cost per agent step
// with the instant scripted model, steps in sequence (one workflow of b.N
// steps): the driver's PUT and long-poll, the coordinator's records and
// publish, a worker's pull, agent loop and commit, the driver's read of the
// output. Compare with pkg/flow's BenchmarkLocalStep/sqlite (the same step
// in-process) for the overhead of the cluster runtime.
//
//	go test -run '^$' -bench ClusterStep -benchtime 300x ./pkg/flow/cluster/
func BenchmarkClusterStep(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"), Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, err := client.New(d.URL, "")
	if err != nil {
		b.Fatal(err)
	}
	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "hi"})
	if err != nil {
		b.Fatal(err)
	}
	// The scripted model answers reply n to a transcript with n assistant
	// messages: step n of the chain gets reply n.
	script := make([]llm.ScriptReply, b.N)
	for i := range script {
		script[i] = llm.ScriptReply{Content: "hello"}
	}
	a := flow.NewAgent(agent.Spec{Name: "echo", Model: "scripted", Script: script}, "")
	steps := make(flow.Sequence, b.N)
	for i := range steps {
		steps[i] = a
	}
	b.ResetTimer()
	if _, err := rt.Run(ctx, steps, in); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
}

// BenchmarkFanOut1000 runs a fan-out of 1,000 agent branches (merged in the
// driver) whose model takes 500 ms (the fake OpenAI server), on the cluster
// runtime with 1 and 2 workers of 250 slots each, on the embedded store.
// One iteration is one whole fan-out: wall time per op, and steps/s.
//
//	go test -run '^$' -bench FanOut1000 -benchtime 1x ./pkg/flow/cluster/
func BenchmarkFanOut1000(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			srv := llmtest.NewServer(b)
			srv.Handle(func(llmtest.Request) llmtest.Reply {
				return llmtest.Reply{Content: "branch", Delay: 500 * time.Millisecond}
			})
			env := map[string]string{"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": srv.URL()}
			ctx := context.Background()
			dir := b.TempDir()
			d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: "sqlite:" + filepath.Join(dir, "rath.db"),
				Workers: workers, Slots: 250, Getenv: func(k string) string { return env[k] }})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			c, err := client.New(d.URL, "")
			if err != nil {
				b.Fatal(err)
			}
			wf := flow.Fanout(1000, flow.NewAgent(agent.Spec{Name: "branch", Model: "gpt-test"}, ""))
			b.ResetTimer()
			for range b.N {
				rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "fan out"})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := rt.Run(ctx, wf, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "steps/s")
			// Jobs JetStream delivered again (a delivery lost or not acked
			// within AckWait): each holds the fan-in back by AckWait.
			b.ReportMetric(counterSum(b, d, "rath_steps_redelivered_total"), "redelivered")
		})
	}
}

// counterSum is the sum over labels of the counter name in d's registry.
func counterSum(b *testing.B, d *app.Dev, name string) float64 {
	b.Helper()
	mfs, err := d.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
