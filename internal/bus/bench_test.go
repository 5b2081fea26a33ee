package bus_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
)

var transports = []struct {
	name      string
	inProcess bool
	// storage: file is what Rath runs with; memory shows the file store's
	// share (an ack that empties a file-stored work queue makes the server
	// start a new block file, ~0.15ms on this machine).
	storage jetstream.StorageType
}{
	{"inprocess", true, jetstream.FileStorage},
	{"tcp", false, jetstream.FileStorage},
	{"inprocess-memory", true, jetstream.MemoryStorage},
}

// BenchmarkPublish: one job per op, synchronous publish waiting for the
// PubAck (file storage).
func BenchmarkPublish(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			bs, _, _ := bustest.NewWith(b, bustest.Options{InProcess: tr.inProcess, Config: bus.Config{Storage: tr.storage}})
			ctx := context.Background()
			j := testJob("bench", "")
			i := 0
			for b.Loop() {
				j.StepID = "p-" + strconv.Itoa(i)
				i++
				if _, err := bs.Publish(ctx, j, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkPublishFetchAck: one job per op through the full round trip a
// worker sees: publish (PubAck), fetch one, confirmed ack (DoubleAck).
func BenchmarkPublishFetchAck(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			bs, _, _ := bustest.NewWith(b, bustest.Options{InProcess: tr.inProcess, Config: bus.Config{Storage: tr.storage}})
			ctx := context.Background()
			c, err := bs.Consumer(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			j := testJob("bench", "")
			i := 0
			for b.Loop() {
				j.StepID = "pfa-" + strconv.Itoa(i)
				i++
				if _, err := bs.Publish(ctx, j, nil); err != nil {
					b.Fatal(err)
				}
				ds, err := c.Fetch(ctx, 1, 5*time.Second)
				if err != nil || len(ds) != 1 {
					b.Fatalf("fetch: %d, %v", len(ds), err)
				}
				if err := ds[0].Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkFetchBatchAck: drain pre-published jobs in batches of 64 with
// confirmed acks, the shape of a busy worker (publishing is not timed).
func BenchmarkFetchBatchAck(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			bs, _, _ := bustest.NewWith(b, bustest.Options{InProcess: tr.inProcess, Config: bus.Config{Storage: tr.storage}})
			ctx := context.Background()
			c, err := bs.Consumer(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			j := testJob("bench", "")
			for i := range b.N {
				j.StepID = "fb-" + strconv.Itoa(i)
				if _, err := bs.Publish(ctx, j, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			start := time.Now()
			for got := 0; got < b.N; {
				ds, err := c.Fetch(ctx, min(64, b.N-got), 5*time.Second)
				if err != nil || len(ds) == 0 {
					b.Fatalf("fetch: %d, %v", len(ds), err)
				}
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						b.Fatal(err)
					}
				}
				got += len(ds)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
