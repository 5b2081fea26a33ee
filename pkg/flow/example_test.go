package flow_test

import (
	"context"
	"fmt"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/session"
)

// offline resolves every agent to the scripted model of its spec. The
// scripted model answers with script[n], n being the number of assistant
// messages in the request.
func offline() flow.Env {
	return flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: s.Script}, llm.ScriptedModel, nil
	}}
}

func script(name string, replies ...string) agent.Spec {
	s := agent.Spec{Name: name, Model: "scripted"}
	for _, r := range replies {
		s.Script = append(s.Script, llm.ScriptReply{Content: r})
	}
	return s
}

func show(ctx context.Context, s session.Session) {
	cs, _ := s.Chunks(ctx)
	for _, c := range cs {
		fmt.Println(c)
	}
}

// A sequence of two agents, run in-process: the second sees the first's
// reply.
func ExampleSequence() {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	planner := flow.NewAgent(script("planner", "Day 1: Fushimi Inari."), "plans trips")
	critic := flow.NewAgent(script("critic", "unused", "Start early to beat the crowds."), "reviews plans")

	rt, _ := flow.NewLocal("example-seq", offline())
	in, _ := session.FromUserMessage(ctx, g, "Plan a day in Kyoto.")
	out, err := flow.Run(ctx, rt, flow.Seq(planner, critic), in)
	if err != nil {
		fmt.Println(err)
		return
	}
	show(ctx, out)
	// Output:
	// user: Plan a day in Kyoto.
	// assistant: Day 1: Fushimi Inari.
	// assistant: Start early to beat the crowds.
}

// A fan-out of three branches: each runs the same agent on its own fork of
// the input (three steps, keys 1.b0.1, 1.b1.1, 1.b2.1), and the outputs are
// merged in branch order without repeating the shared question.
func ExampleFanout() {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	poet := flow.NewAgent(script("poet", "An old silent pond"), "writes haiku")

	rt, _ := flow.NewLocal("example-fanout", offline())
	in, _ := session.FromUserMessage(ctx, g, "Write a first line.")
	out, err := flow.Run(ctx, rt, flow.Fanout(3, poet), in)
	if err != nil {
		fmt.Println(err)
		return
	}
	show(ctx, out)
	fmt.Println(out.Op(), "of", len(out.Parents()), "parents")
	// Output:
	// user: Write a first line.
	// assistant: An old silent pond
	// assistant: An old silent pond
	// assistant: An old silent pond
	// merge of 2 parents
}

// A compressor replaces the transcript with one summary: the output's
// parent is the compressed version, and its transcript is the summary
// alone.
func ExampleCompressor() {
	ctx := context.Background()
	g := session.NewMemoryGraph()
	in, _ := session.New(ctx, g,
		session.User("My flight is at 9."), session.Assistant("Noted."),
		session.User("And the hotel is near the station."), session.Assistant("Noted too."))
	squash := &flow.Compressor{Spec: script("squash", "x", "x", "Flight at 9; hotel near the station.")}

	rt, _ := flow.NewLocal("example-compress", offline())
	out, err := flow.Run(ctx, rt, squash, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Op(), out.Parents()[0] == in.ID(), out.Len())
	show(ctx, out)
	// Output:
	// compress true 1
	// summary: {"content":"Flight at 9; hotel near the station."}
}
