package bus_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/internal/bus/embedded"
)

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	c := bus.Config{}.WithDefaults()
	if c.Replicas != 1 || c.Storage != jetstream.FileStorage || c.AckWait != 30*time.Second ||
		c.MaxDeliver != 5 || c.Backoff != nil || c.DedupeWindow != 2*time.Minute ||
		c.EventsMaxAge != 24*time.Hour || c.EventsMaxBytes != 256<<20 || c.MaxAckPending != 1024 || c.Logger == nil || c.NowFunc == nil {
		t.Fatalf("defaults: %+v", c)
	}
	// Set fields are kept, and Backoff is copied.
	bo := []time.Duration{time.Second}
	c = bus.Config{AckWait: time.Second, MaxDeliver: 3, Backoff: bo}.WithDefaults()
	if c.AckWait != time.Second || c.MaxDeliver != 3 {
		t.Fatalf("kept fields: %+v", c)
	}
	bo[0] = time.Hour
	if c.Backoff[0] != time.Second {
		t.Fatal("WithDefaults aliases the caller's Backoff slice")
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	_, _, nc := bustest.New(t)
	ctx := testCtx(t)
	tests := []struct {
		name  string
		cfg   bus.Config
		field string
	}{
		{"negative replicas", bus.Config{Replicas: -1}, "Replicas"},
		{"too many replicas", bus.Config{Replicas: 6}, "Replicas"},
		{"bad storage", bus.Config{Storage: 7}, "Storage"},
		{"negative ack wait", bus.Config{AckWait: -time.Second}, "AckWait"},
		{"negative max deliver", bus.Config{MaxDeliver: -1}, "MaxDeliver"},
		{"backoff as long as max deliver", bus.Config{MaxDeliver: 2, Backoff: []time.Duration{time.Second, time.Second}}, "len(Backoff)"},
		{"zero backoff value", bus.Config{Backoff: []time.Duration{time.Second, 0}}, "Backoff[1]"},
		{"negative dedupe", bus.Config{DedupeWindow: -1}, "DedupeWindow"},
		{"short events age", bus.Config{EventsMaxAge: time.Millisecond}, "EventsMaxAge"},
		{"small events bound", bus.Config{EventsMaxBytes: 1 << 20}, "EventsMaxBytes"},
		{"negative events bound", bus.Config{EventsMaxBytes: -1}, "EventsMaxBytes"},
		{"negative max ack pending", bus.Config{MaxAckPending: -5}, "MaxAckPending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := bus.New(ctx, nc, tt.cfg)
			if !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("New: err = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name field %s", err, tt.field)
			}
		})
	}
	if _, err := bus.New(ctx, nil, bus.Config{}); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("New(nil conn): err = %v, want ErrInvalidConfig", err)
	}
}

// New is idempotent and a changed Config updates the streams.
func TestNewIdempotent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b1, _, nc := bustest.New(t)
	j := testJob("", "keep-me")
	mustPublish(ctx, t, b1, j)

	b2, err := bus.New(ctx, nc, bus.Config{EventsMaxAge: time.Hour, DedupeWindow: time.Minute})
	if err != nil {
		t.Fatalf("second New: %v", err)
	}
	s, err := b2.JetStream().Stream(ctx, bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != time.Hour {
		t.Fatalf("events MaxAge = %s after re-declare, want 1h", info.Config.MaxAge)
	}
	if n := streamMsgs(ctx, t, b2, bus.JobsStream); n != 1 {
		t.Fatalf("jobs after re-declare = %d, want 1 (re-declaring must keep messages)", n)
	}
	st, err := b2.Workspaces().Status(ctx)
	if err != nil || st.Bucket() != bus.WorkspacesBucket {
		t.Fatalf("workspaces object store: status %v, err %v", st, err)
	}
	// Consumers: declaring twice is fine too.
	for range 2 {
		if _, err := b2.Consumer(ctx, "default"); err != nil {
			t.Fatalf("Consumer: %v", err)
		}
	}
}

// RATH_EVENTS on one replica of file storage is declared in async persist
// mode (RATH_JOBS is not: its messages must be written before their
// PubAck); a memory stream keeps the default; and a stream declared before
// in another mode keeps it, since the server refuses to change it.
func TestEventsPersistMode(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mode := func(b *bus.Bus, name string) jetstream.PersistModeType {
		t.Helper()
		s, err := b.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		return s.CachedInfo().Config.PersistMode
	}

	b, _, nc := bustest.New(t)
	if got := mode(b, bus.EventsStream); got != jetstream.AsyncPersistMode {
		t.Fatalf("events persist mode = %v, want async", got)
	}
	if got := mode(b, bus.JobsStream); got != jetstream.DefaultPersistMode {
		t.Fatalf("jobs persist mode = %v, want default", got)
	}
	if _, err := bus.New(ctx, nc, bus.Config{}); err != nil {
		t.Fatalf("second New: %v", err)
	}
	// More replicas (or memory) asked of the async stream: NATS can
	// neither keep async on them nor change the mode; New says what to do.
	for _, c := range []bus.Config{{Replicas: 3}, {Storage: jetstream.MemoryStorage}} {
		if _, err := bus.New(ctx, nc, c); !errors.Is(err, bus.ErrInvalidConfig) || !strings.Contains(err.Error(), "nats stream rm "+bus.EventsStream) {
			t.Fatalf("New(%+v) over the async stream: %v, want ErrInvalidConfig saying to delete %s", c, err, bus.EventsStream)
		}
	}

	mem, _, _ := bustest.NewWith(t, bustest.Options{Config: bus.Config{Storage: jetstream.MemoryStorage}})
	if got := mode(mem, bus.EventsStream); got != jetstream.DefaultPersistMode {
		t.Fatalf("memory events persist mode = %v, want default", got)
	}

	// A stream an earlier release declared in the default mode: New keeps
	// the mode (changing it is refused) and still updates the rest.
	srv, err := embedded.Start(ctx, embedded.Options{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	old, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Close)
	js, err := jetstream.New(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: bus.EventsStream, Subjects: []string{bus.EventsSubjects}, MaxAge: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	upgraded, err := bus.New(ctx, old, bus.Config{EventsMaxAge: time.Hour})
	if err != nil {
		t.Fatalf("New over a stream in the default mode: %v", err)
	}
	s, err := upgraded.JetStream().Stream(ctx, bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.PersistMode != jetstream.DefaultPersistMode || c.MaxAge != time.Hour {
		t.Fatalf("events after New over an older stream: persist mode %v, MaxAge %s; want default, 1h", c.PersistMode, c.MaxAge)
	}
}
