// Command eventsmem measures what RATH_EVENTS costs a nats-server in
// memory (docs/BENCHMARKS.md, issue 25, twenty-fourth round). It declares
// the streams as a coordinator does, with -max-bytes as
// --events-max-bytes, publishes -runs runs' events as a cluster's
// one-step runs do (four events a run, on the run's own subjects; the
// last acknowledged, the rest not; with -batch as one message, as a
// worker sends a step that ends within its linger), and every 50,000 runs prints the
// server's resident memory (read from /proc, so the server runs on this
// machine: -pid) with the stream's messages, bytes and subjects; then
// again after 15 s idle.
//
//	nats-server -js -p 45999 -sd "$(mktemp -d)" & pid=$!
//	go run ./scripts/eventsmem -nats nats://127.0.0.1:45999 -pid $pid -max-bytes 268435456 -runs 600000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
)

func rss(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "?"
}

func main() {
	url := flag.String("nats", "nats://127.0.0.1:4222", "the nats-server's URL")
	pid := flag.Int("pid", 0, "the nats-server's process id, for its resident memory")
	maxBytes := flag.Int64("max-bytes", bus.DefaultEventsMaxBytes, "RATH_EVENTS' bound in bytes (--events-max-bytes)")
	runs := flag.Int("runs", 400000, "runs to publish the events of")
	batch := flag.Bool("batch", false, "publish a run's four events as one message (a batch), as a worker sends a step that ends within its linger")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	err := run(ctx, os.Stdout, *url, *pid, *maxBytes, *runs, *batch)
	cancel()
	if err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer, url string, pid int, maxBytes int64, runs int, batch bool) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	b, err := bus.New(ctx, nc, bus.Config{EventsMaxBytes: maxBytes})
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	data, err := json.Marshal(map[string]any{"agent": "bench", "model": "scripted", "text": strings.Repeat("x", 120)})
	if err != nil {
		return err
	}
	types := []string{bus.EventStepStarted, bus.EventStepToken, bus.EventStepCommitted, bus.EventRunCompleted}
	start := time.Now()
	for i := range runs {
		run := fmt.Sprintf("run-%026d", i)
		es := make([]bus.Event, len(types))
		for j, typ := range types {
			es[j] = bus.Event{RunID: run, StepID: run + "-s0", Type: typ, Data: data}
		}
		if batch {
			if err := b.PublishEvents(ctx, es); err != nil {
				return err
			}
		} else {
			for j, e := range es {
				publish := b.PublishProgress
				if j == len(es)-1 {
					publish = b.PublishEvent
				}
				if err := publish(ctx, e); err != nil {
					return err
				}
			}
		}
		if i%5000 != 4999 {
			continue
		}
		if err := b.FlushEvents(ctx); err != nil {
			return err
		}
		if i%50000 == 49999 {
			st, err := js.Stream(ctx, bus.EventsStream)
			if err != nil {
				return err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%6.1fs runs=%d rss=%s msgs=%d bytes=%d subjects=%d\n", time.Since(start).Seconds(), i+1, rss(pid),
				info.State.Msgs, info.State.Bytes, info.State.NumSubjects)
		}
	}
	time.Sleep(15 * time.Second)
	fmt.Fprintf(w, "after 15 s idle: rss=%s\n", rss(pid))
	return nil
}
