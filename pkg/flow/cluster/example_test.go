package cluster_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/flow/cluster"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// A workflow whose three branches run as step jobs on the cluster's
// workers, merged in the driver, then reviewed. Here the cluster is an
// in-process stack (coordinator, embedded NATS and store, two workers);
// against a real deployment only the client's URL changes.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rath-cluster-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dev, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: 2})
	if err != nil {
		log.Print(err)
		return
	}
	defer dev.Close()
	if err := example(ctx, dev.URL); err != nil {
		log.Print(err)
	}
	// Output:
	// A line of verse.
	// A line of verse.
	// A line of verse.
	// Keep the second.
	// succeeded 4 steps
}

func example(ctx context.Context, url string) error {
	c, err := client.New(url, "")
	if err != nil {
		return err
	}

	poet := agent.Spec{Name: "poet", Model: "scripted", Script: []llm.ScriptReply{{Content: "A line of verse."}}}
	critic := agent.Spec{Name: "critic", Model: "scripted", Script: []llm.ScriptReply{{Content: "unused"}, {Content: "unused"}, {Content: "unused"}, {Content: "Keep the second."}}}
	wf := flow.Seq(flow.Fanout(3, flow.NewAgent(poet, "")), flow.NewAgent(critic, ""))

	rt, in, err := cluster.Start(ctx, c, client.WorkflowRequest{Message: "Write a line of verse."})
	if err != nil {
		return err
	}
	out, err := rt.Run(ctx, wf, in)
	if err != nil {
		return err
	}
	chunks, err := out.Chunks(ctx)
	if err != nil {
		return err
	}
	for _, ch := range chunks {
		if ch.Kind() == session.KindAssistant {
			fmt.Println(ch.Text())
		}
	}
	r, err := c.GetRun(ctx, rt.RunID())
	if err != nil {
		return err
	}
	fmt.Println(r.Status, len(r.Steps), "steps")
	return nil
}
