package flow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/storeurl"
)

// BenchmarkLocalStep measures the in-process runtime's cost per agent step
// with a model that answers instantly (the scripted model): key lookup,
// the agent loop, the commit. It is the baseline the cluster runtime's
// per-step overhead is compared with.
func BenchmarkLocalStep(b *testing.B) {
	for _, graph := range []string{"memory", "sqlite"} {
		b.Run(graph, func(b *testing.B) {
			ctx := context.Background()
			var g session.Graph = session.NewMemoryGraph()
			if graph == "sqlite" {
				st, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "rath.db"), storeurl.Options{Migrate: true, Create: true})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				g = st
			}
			in, err := session.FromUserMessage(ctx, g, "hi")
			if err != nil {
				b.Fatal(err)
			}
			a := flow.NewAgent(scriptedSpec("echo", "hello"), "")
			b.ResetTimer()
			for i := range b.N {
				rt, _ := flow.NewLocal(fmt.Sprintf("bench-%d", i), scriptedEnv())
				if _, err := flow.Run(ctx, rt, a, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLocalFanout measures a fan-out of 100 agent branches merged,
// in-process, per branch.
func BenchmarkLocalFanout(b *testing.B) {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in, err := session.FromUserMessage(ctx, g, "hi")
	if err != nil {
		b.Fatal(err)
	}
	wf := flow.Fanout(100, flow.NewAgent(scriptedSpec("echo", "hello"), ""))
	b.ResetTimer()
	for i := range b.N {
		rt, _ := flow.NewLocal(fmt.Sprintf("bench-%d", i), scriptedEnv())
		if _, err := flow.Run(ctx, rt, wf, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*100), "µs/branch")
}
