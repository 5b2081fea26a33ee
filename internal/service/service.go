// Package service gives a process's long-running parts one lifecycle:
// Start(ctx) starts a service's work in goroutines it owns and returns;
// Stop ends that work and returns only when every goroutine the service
// started has returned. A program starts its services explicitly, in
// order, and stops them in the reverse order on shutdown (a [Group]); no
// service starts another's goroutines as a side effect of a method call.
//
// The shape follows river's startstop: a service embeds a [Base], whose
// [Base.Go] runs the service's loop under a context that Stop cancels.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Service is a long-running part of a process.
type Service interface {
	// Start starts the service's work and returns; the work runs until
	// Stop or the end of ctx. An error means nothing was started. Start
	// of a running service fails with ErrStarted.
	Start(ctx context.Context) error
	// Stop ends the service's work and waits for it: when Stop returns,
	// no goroutine the service started is running. Stop of a service
	// that is not running returns at once; Stop may be called more than
	// once, and from several goroutines.
	Stop()
}

// ErrStarted is the error of Start on a running service.
var ErrStarted = errors.New("service: already started")

// Base runs one service's work: embed it and implement Start with
// [Base.Go]. Its zero value is ready. A stopped Base may start again.
type Base struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Go runs fn in a goroutine under a context derived from ctx that Stop
// cancels, and returns at once: ErrStarted when a previous fn is still
// running. fn must return soon after its context ends, having waited for
// every goroutine it started.
func (b *Base) Go(ctx context.Context, fn func(ctx context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		select {
		case <-b.done:
		default:
			return ErrStarted
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	b.cancel, b.done = cancel, done
	go func() {
		defer close(done)
		defer cancel()
		fn(ctx)
	}()
	return nil
}

// Stop cancels the running fn's context and waits for it to return.
func (b *Base) Stop() {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Done is closed once the service's work has returned (after Stop, or
// when its context ended); a service never started is done.
func (b *Base) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	return b.done
}

// Group is services started in order and stopped in the reverse order:
// a service may depend on those before it (the workflow driver's step
// waits on the event feed), which run until it has stopped.
type Group []Service

// Start starts the services in order. When one fails to start, those
// already started are stopped and its error returned.
func (g Group) Start(ctx context.Context) error {
	for i, s := range g {
		if err := s.Start(ctx); err != nil {
			g[:i].Stop()
			return fmt.Errorf("start %T: %w", s, err)
		}
	}
	return nil
}

// Stop stops the services in the reverse order of Start, each after the
// one started after it has stopped.
func (g Group) Stop() {
	for i := len(g) - 1; i >= 0; i-- {
		g[i].Stop()
	}
}
