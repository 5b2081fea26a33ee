package service_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/rath-run/rath/internal/service"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loop is a service whose work runs until its context ends, starting a
// goroutine of its own that it waits for.
type loop struct {
	service.Base
	name    string
	started chan struct{}
	log     *[]string
	mu      *sync.Mutex
	fail    error
}

func (l *loop) Start(ctx context.Context) error {
	if l.fail != nil {
		return l.fail
	}
	return l.Go(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { <-ctx.Done() })
		close(l.started)
		wg.Wait()
		l.mu.Lock()
		*l.log = append(*l.log, "stopped "+l.name)
		l.mu.Unlock()
	})
}

func newLoop(name string, log *[]string, mu *sync.Mutex) *loop {
	return &loop{name: name, started: make(chan struct{}), log: log, mu: mu}
}

func TestStartStop(t *testing.T) {
	var log []string
	var mu sync.Mutex
	l := newLoop("a", &log, &mu)
	select {
	case <-l.Done():
	default:
		t.Fatal("a service never started is not done")
	}
	l.Stop() // not started: returns at once
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-l.started
	if err := l.Start(context.Background()); !errors.Is(err, service.ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	select {
	case <-l.Done():
		t.Fatal("done while running")
	default:
	}
	l.Stop()
	select {
	case <-l.Done():
	default:
		t.Fatal("Stop returned before the work did")
	}
	l.Stop() // twice: fine
	if !slices.Equal(log, []string{"stopped a"}) {
		t.Fatalf("log = %q", log)
	}
	// A stopped service starts again.
	l.started = make(chan struct{})
	if err := l.Start(context.Background()); err != nil {
		t.Fatalf("restart: %v", err)
	}
	<-l.started
	l.Stop()
}

func TestContextEndStops(t *testing.T) {
	var log []string
	var mu sync.Mutex
	l := newLoop("a", &log, &mu)
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-l.Done()
	l.Stop()
}

func TestGroupOrder(t *testing.T) {
	var log []string
	var mu sync.Mutex
	a, b, c := newLoop("a", &log, &mu), newLoop("b", &log, &mu), newLoop("c", &log, &mu)
	g := service.Group{a, b, c}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Stop()
	if want := []string{"stopped c", "stopped b", "stopped a"}; !slices.Equal(log, want) {
		t.Fatalf("stop order %q, want %q", log, want)
	}
}

func TestGroupStartFailureStopsTheStarted(t *testing.T) {
	var log []string
	var mu sync.Mutex
	a, b := newLoop("a", &log, &mu), newLoop("b", &log, &mu)
	bad := newLoop("bad", &log, &mu)
	bad.fail = errors.New("no")
	err := service.Group{a, b, bad}.Start(context.Background())
	if err == nil || !errors.Is(err, bad.fail) {
		t.Fatalf("Start = %v, want bad's error", err)
	}
	if want := []string{"stopped b", "stopped a"}; !slices.Equal(log, want) {
		t.Fatalf("after a failed start: %q, want %q", log, want)
	}
}
