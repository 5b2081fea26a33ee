package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
)

// The examples run against a real coordinator with one worker (TestMain
// starts it); its URL is serverURL and its admin token bootstrapToken. A
// program would use its coordinator's URL and an API token (rathctl token
// create).

// greeter is an agent spec whose scripted model answers "Hello!".
const greeter = `{"name": "greeter", "model": "scripted", "script": [{"content": "Hello!"}]}`

// Submit an agent run on a new session and wait for it to end.
func ExampleClient_SubmitAgent() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "Hi!"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("submitted:", run.Kind)
	final, err := cl.WaitRun(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", final.Status)
	// The run's output is a session version; its last chunk is the answer.
	chunks, err := cl.Graph().Transcript(ctx, *final.Output)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("answer:", chunks[len(chunks)-1].Text())
	// Output:
	// submitted: agent
	// status: succeeded
	// answer: Hello!
}

// Follow a run's events from its start: a watch that attaches after the run
// ended still sees its whole story, and returns after its end event.
func ExampleClient_WatchRun() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "Hi!"})
	if err != nil {
		log.Fatal(err)
	}
	err = cl.WatchRun(ctx, run.ID, client.WatchOptions{}, func(e api.Event) error {
		switch e.Type {
		case api.EventRunSubmitted, api.EventStepCommitted:
			fmt.Println(e.Type)
		case api.EventRunCompleted:
			end, _ := e.End()
			fmt.Println(e.Type, "with an output:", end.Output != "")
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// run.submitted
	// step.committed
	// run.completed with an output: true
}

// An agent whose spec lists a tool under "approve" pauses before calling
// it; the run waits until someone decides.
func ExampleClient_Approve() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	spec := `{"name": "writer", "model": "scripted", "tools": ["builtin"], "approve": ["write_workspace_file"],
	  "script": [
	    {"content": "Saving.", "tool_calls": [{"id": "w1", "function": {"name": "write_workspace_file", "arguments": {"path": "note.md", "content": "hi"}}}]},
	    {"content": "Saved."}]}`
	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(spec), Message: "Save a note."})
	if err != nil {
		log.Fatal(err)
	}
	waiting, err := cl.WaitRun(ctx, run.ID) // returns at the pause
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", waiting.Status)
	res, err := cl.Approve(ctx, run.ID, "") // every pending call
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range res.Decided {
		fmt.Println(d.Decision, d.CallID, d.Tool)
	}
	fmt.Println("continues:", res.Continuation != nil)
	final, err := cl.WaitRun(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", final.Status)
	// Output:
	// status: waiting
	// approved w1 write_workspace_file
	// continues: true
	// status: succeeded
}

// Cancel a run. This one waits on a queue no worker serves.
func ExampleClient_CancelRun() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "Hi!", Queue: "nobody-listens"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("before:", run.Status)
	run, err = cl.CancelRun(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after:", run.Status, run.Terminal())
	// Canceling it again is a conflict.
	_, err = cl.CancelRun(ctx, run.ID)
	var apiErr *client.APIError
	fmt.Println("again:", errors.As(err, &apiErr), apiErr.Code)
	// Output:
	// before: pending
	// after: canceled true
	// again: true conflict
}

// List runs, newest first, a page at a time.
func ExampleClient_ListRuns() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	var ids []string
	for range 3 {
		run, err := cl.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "Hi!", Queue: "list-example"})
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	page, err := cl.ListRuns(ctx, api.ListRunsParams{Limit: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Runs), page.Runs[0].ID == ids[2], page.Runs[1].ID == ids[1])
	next, err := cl.ListRuns(ctx, api.ListRunsParams{Limit: 1, Before: page.Runs[1].ID})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(next.Runs), next.Runs[0].ID == ids[0])
	for _, id := range ids {
		if _, err := cl.CancelRun(ctx, id); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// 2 true true
	// 1 true
}

// Drive a workflow run from a program: each step is forwarded by a worker,
// and the program ends the run with its output.
func ExampleClient_SubmitWorkflow() {
	ctx := context.Background()
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	run, err := cl.SubmitWorkflow(ctx, api.SubmitRequest{Driver: api.DriverClient, Message: "Hi!"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Kind, run.Driver, run.Status)
	call := json.RawMessage(`{"kind": "agent", "agent": ` + greeter + `}`)
	st, err := cl.PutStepWait(ctx, run.ID, "greet", call, run.Input, 0)
	if err != nil {
		log.Fatal(err)
	}
	for !st.Terminal() {
		if st, err = cl.GetStep(ctx, run.ID, "greet", 30e9); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("step:", st.Status)
	run, err = cl.CompleteRun(ctx, run.ID, *st.Output)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("run:", run.Status, *run.Output == *st.Output)
	// Output:
	// workflow client pending
	// step: committed
	// run: succeeded true
}

// Ask who a token acts as; rathctl login does this before storing one.
func ExampleClient_WhoAmI() {
	cl, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	who, err := cl.WhoAmI(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(who.TokenID, who.Tenant, who.Scope)
	// Output:
	// bootstrap default admin
}

// Create a read-only token, use it, and revoke it (admin scope).
func ExampleClient_CreateToken() {
	ctx := context.Background()
	admin, err := client.New(serverURL, bootstrapToken)
	if err != nil {
		log.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, api.CreateTokenRequest{Name: "dashboard", Scope: api.ScopeRead})
	if err != nil {
		log.Fatal(err)
	}
	reader, err := client.New(serverURL, tok.Secret)
	if err != nil {
		log.Fatal(err)
	}
	who, err := reader.WhoAmI(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(who.Name, who.Scope, who.TokenID == tok.ID)
	// A read token cannot submit.
	_, err = reader.SubmitAgent(ctx, api.SubmitRequest{Agent: json.RawMessage(greeter), Message: "Hi!"})
	var apiErr *client.APIError
	fmt.Println("submit:", errors.As(err, &apiErr), apiErr.Status)
	if _, err := admin.RevokeToken(ctx, tok.ID); err != nil {
		log.Fatal(err)
	}
	_, err = reader.WhoAmI(ctx)
	fmt.Println("after revoke:", errors.As(err, &apiErr), apiErr.Status)
	// Output:
	// dashboard read true
	// submit: true 403
	// after revoke: true 401
}
