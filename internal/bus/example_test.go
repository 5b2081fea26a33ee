package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/pkg/session"
)

// A coordinator publishes a step; a worker fetches it, keeps it alive while
// it runs, and acks after committing.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rath-bus-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(ctx, embedded.Options{StoreDir: dir, InProcess: true, NoListen: true})
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	b, err := bus.New(ctx, nc, bus.Config{})
	if err != nil {
		panic(err)
	}

	// Coordinator.
	job := bus.Job{
		StepID: "run-7/step-1",
		RunID:  "run-7",
		Input:  session.NewID().String(),
		Target: json.RawMessage(`{"agent":"writer"}`),
	}
	dup, err := b.Publish(ctx, job, nil)
	fmt.Println("published, duplicate:", dup, err)
	dup, err = b.Publish(ctx, job, nil)
	fmt.Println("published again, duplicate:", dup, err)

	// Worker.
	c, err := b.Consumer(ctx, bus.DefaultQueue)
	if err != nil {
		panic(err)
	}
	ds, err := c.Fetch(ctx, 10, time.Second)
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		if d.Err != nil {
			_ = d.Term(d.Err.Error())
			continue
		}
		stop := d.KeepAlive(ctx, 0)
		fmt.Println("running", d.Job.StepID, "delivery", d.NumDelivered())
		// ... run the step, commit the new version keyed by StepID ...
		stop()
		fmt.Println("ack:", d.Ack(ctx))
	}
	// Output:
	// published, duplicate: false <nil>
	// published again, duplicate: true <nil>
	// running run-7/step-1 delivery 1
	// ack: <nil>
}
