package selector_test

import (
	"context"
	"fmt"

	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/flow"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/selector"
	"github.com/rath-run/rath/pkg/session"
)

// A selector loop: the router chooses billing, then the writer, then
// nothing; control flow is an ordinary for loop, bounded. The scripted
// model answers with script[n], n being the number of assistant messages
// in the request (decisions are evidence and are not sent to models).
func ExampleSelector_Select() {
	ctx := context.Background()
	offline := flow.Env{Resolve: func(s agent.Spec) (llm.Provider, string, error) {
		return &llm.Scripted{Replies: s.Script}, llm.ScriptedModel, nil
	}}
	spec := func(name string, replies ...string) agent.Spec {
		s := agent.Spec{Name: name, Model: "scripted"}
		for _, r := range replies {
			s.Script = append(s.Script, llm.ScriptReply{Content: r})
		}
		return s
	}
	billing := flow.NewAgent(spec("billing", "Refunded the duplicate charge."), "handles billing and refunds")
	writer := flow.NewAgent(spec("writer", "unused", "Dear customer, your refund is on its way."), "writes the reply")
	sel := selector.New(spec("router", "0", "I pick 1: billing is done.", "-1"))

	rt, _ := flow.NewLocal("example-select", offline)
	ctx = flow.WithRuntime(ctx, rt)
	s, _ := session.FromUserMessage(ctx, session.NewMemoryGraph(), "I was charged twice.")
	for round := 0; round < 5; round++ {
		w, next, err := sel.Select(ctx, s, billing, writer)
		if err != nil {
			fmt.Println(err)
			return
		}
		s = next
		if flow.IsEmpty(w) {
			fmt.Println("router: done")
			break
		}
		fmt.Println("router chose:", w.(flow.Describer).Description())
		if s, err = w.Forward(ctx, s); err != nil {
			fmt.Println(err)
			return
		}
	}
	cs, _ := s.Chunks(ctx)
	for _, c := range cs {
		if c.ModelFacing() {
			fmt.Println(c)
		}
	}
	// Output:
	// router chose: handles billing and refunds
	// router chose: writes the reply
	// router: done
	// user: I was charged twice.
	// assistant: Refunded the duplicate charge.
	// assistant: Dear customer, your refund is on its way.
}
