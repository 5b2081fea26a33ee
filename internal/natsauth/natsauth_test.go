package natsauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/natsauth"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
)

// violations collects a connection's asynchronous errors (permission
// violations arrive that way).
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

// saw reports whether a permissions violation naming subject was seen.
func (v *violations) saw(subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subject) {
			return true
		}
	}
	return false
}

type cluster struct {
	srv       *embedded.Server
	coord     *bus.Bus
	coordConn *nats.Conn
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	users, err := natsauth.ServerUsers([]natsauth.User{
		{Name: "coordinator", Password: "coord-pw", Role: natsauth.RoleCoordinator},
		{Name: "worker", Password: "worker-pw", Role: natsauth.RoleWorker},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.Start(ctx, embedded.Options{StoreDir: t.TempDir(), Port: -1, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect(nats.UserInfo("coordinator", "coord-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(ctx, nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{srv: srv, coord: b, coordConn: nc}
}

// worker connects with the worker's credentials the way cmd/worker does
// (natsauth.ClientOptions from the environment).
func (c *cluster) worker(t *testing.T, v *violations) *nats.Conn {
	t.Helper()
	env := map[string]string{"RATH_NATS_USER": "worker", "RATH_NATS_PASSWORD": "worker-pw"}
	opts, err := natsauth.ClientOptions(natsauth.RoleWorker, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.ErrorHandler(v.handler))
	nc, err := c.srv.Connect(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func job(step string) bus.Job {
	return bus.Job{StepID: step, RunID: "run-1", Queue: "default", Input: session.NewID().String(), Target: json.RawMessage(`{}`)}
}

func jobsInStream(ctx context.Context, t *testing.T, b *bus.Bus) uint64 {
	t.Helper()
	s, err := b.JetStream().Stream(ctx, bus.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestWorkerDoesItsJob: with the worker's permissions, a worker binds the
// streams, pulls and acks a job, publishes an event the coordinator
// receives, and writes and reads a workspace object.
func TestWorkerDoesItsJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t)
	var v violations
	wnc := c.worker(t, &v)
	wb, err := bus.New(ctx, wnc, bus.Config{Bind: true})
	if err != nil {
		t.Fatalf("worker binding the streams: %v", err)
	}
	if _, err := c.coord.Publish(ctx, job("step-1"), nil); err != nil {
		t.Fatal(err)
	}
	cons, err := wb.Consumer(ctx, "default")
	if err != nil {
		t.Fatalf("worker consumer: %v", err)
	}
	ds, err := cons.Fetch(ctx, 1, 5*time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("worker fetch: %d deliveries, %v", len(ds), err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("worker ack: %v", err)
	}
	if n := jobsInStream(ctx, t, c.coord); n != 0 {
		t.Errorf("%d jobs left after the ack, want 0", n)
	}
	events, stop, err := c.coord.WatchRun(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	if err := wb.PublishEvent(ctx, bus.Event{RunID: "run-1", Type: "step.started"}); err != nil {
		t.Fatalf("worker event: %v", err)
	}
	select {
	case e := <-events:
		if e.Type != "step.started" {
			t.Errorf("event %s, want step.started", e.Type)
		}
	case <-ctx.Done():
		t.Fatal("the coordinator never saw the worker's event")
	}
	// The run abort events reach the worker (bus.SubscribeRunAborts).
	aborted := make(chan string, 4)
	stopAborts, err := wb.SubscribeRunAborts(func(runID string) { aborted <- runID })
	if err != nil {
		t.Fatalf("worker run abort subscription: %v", err)
	}
	defer stopAborts()
	for _, typ := range []string{bus.EventRunCanceled, bus.EventRunTimedOut} {
		if err := c.coord.PublishEvent(ctx, bus.Event{RunID: "run-" + typ[4:5], Type: typ}); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-aborted:
			if id != "run-"+typ[4:5] {
				t.Errorf("%s: abort for %q", typ, id)
			}
		case <-ctx.Done():
			t.Fatalf("the worker never saw %s", typ)
		}
	}
	if _, err := wb.Workspaces().PutBytes(ctx, "snap-1", []byte("files")); err != nil {
		t.Fatalf("worker workspace put: %v", err)
	}
	got, err := wb.Workspaces().GetBytes(ctx, "snap-1")
	if err != nil || string(got) != "files" {
		t.Fatalf("worker workspace get = %q, %v", got, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.errs) != 0 {
		t.Errorf("the worker's own work raised %v", v.errs)
	}
}

// TestWorkerPermissionsRefuse attacks from a worker's credentials: publish
// a job, delete, purge or reconfigure the job stream, delete the job
// consumer, read run events (every tenant's) directly, through a consumer
// on the events stream, or by sniffing the coordinator's inboxes. Each is
// refused by the server (a permissions violation) and changes nothing.
func TestWorkerPermissionsRefuse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := startCluster(t)
	var v violations
	wnc := c.worker(t, &v)
	js, err := jetstream.New(wnc)
	if err != nil {
		t.Fatal(err)
	}
	// A job waits in the queue, so the attacks have something to destroy.
	if _, err := c.coord.Publish(ctx, job("step-1"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.coord.Consumer(ctx, "default"); err != nil {
		t.Fatal(err)
	}

	// Publish a job: core publish and JetStream publish.
	if err := wnc.Publish(bus.JobSubject("default"), []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	wb, err := bus.New(ctx, wnc, bus.Config{Bind: true})
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := wb.Publish(short, job("forged"), nil); err == nil {
		t.Error("worker published a job through JetStream")
	}
	cancelShort()
	testenv.Eventually(t, 5*time.Second, "the publish violation", func() bool { return v.saw(bus.JobSubject("default")) })

	// Announce a token revoked: the coordinators' caches are theirs.
	if err := wnc.Publish(bus.TokenRevokedSubject, []byte("tok_0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the revocation publish violation", func() bool { return v.saw(bus.TokenRevokedSubject) })

	// Administer the streams.
	for _, tc := range []struct {
		name, subject string
		do            func(ctx context.Context) error
	}{
		{"delete the job stream", "$JS.API.STREAM.DELETE." + bus.JobsStream, func(ctx context.Context) error { return js.DeleteStream(ctx, bus.JobsStream) }},
		{"delete the events stream", "$JS.API.STREAM.DELETE." + bus.EventsStream, func(ctx context.Context) error { return js.DeleteStream(ctx, bus.EventsStream) }},
		{"purge the job stream", "$JS.API.STREAM.PURGE." + bus.JobsStream, func(ctx context.Context) error {
			s, err := js.Stream(ctx, bus.JobsStream)
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}},
		{"shrink the job stream", "$JS.API.STREAM.UPDATE." + bus.JobsStream, func(ctx context.Context) error {
			_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: bus.JobsStream, Subjects: []string{bus.JobsSubjects},
				Retention: jetstream.WorkQueuePolicy, MaxAge: time.Second})
			return err
		}},
		{"delete the job consumer", "$JS.API.CONSUMER.DELETE." + bus.JobsStream, func(ctx context.Context) error {
			return js.DeleteConsumer(ctx, bus.JobsStream, bus.ConsumerName("default"))
		}},
		{"read events through a consumer", "$JS.API.CONSUMER.CREATE." + bus.EventsStream, func(ctx context.Context) error {
			_, err := js.CreateConsumer(ctx, bus.EventsStream, jetstream.ConsumerConfig{})
			return err
		}},
	} {
		// A refused request gets no reply: it times out, and the server
		// reports the violation on the connection.
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		err := tc.do(short)
		cancelShort()
		if err == nil {
			t.Errorf("worker could %s", tc.name)
		}
		testenv.Eventually(t, 5*time.Second, "the violation of "+tc.subject, func() bool { return v.saw(tc.subject) })
	}

	// Read events: the event subjects directly, and the inboxes that carry
	// them to the coordinator.
	got := make(chan *nats.Msg, 16)
	// A wildcard over the run abort subjects (run.*) would read
	// run.submitted's data: refused too.
	refusedSubs := []string{"rath.events.>", "_INBOX.>", "rath.events.*.run.*", "rath.events.run-1.step.committed", bus.TokenRevokedSubject}
	for _, subj := range refusedSubs {
		if _, err := wnc.ChanSubscribe(subj, got); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 5*time.Second, "the subscribe violations", func() bool {
		for _, subj := range refusedSubs {
			if !v.saw(subj) {
				return false
			}
		}
		return true
	})
	events, stop, err := c.coord.WatchRun(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	if err := c.coord.PublishEvent(ctx, bus.Event{RunID: "run-1", Type: "step.committed", Data: json.RawMessage(`{"secret":"tenant data"}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-events: // the coordinator got it, so it was delivered
	case <-ctx.Done():
		t.Fatal("the coordinator never saw its event")
	}
	if err := wnc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Errorf("the worker read %s: %s", m.Subject, m.Data)
	default:
	}

	// Nothing changed: the stream, its one job and its consumer are there.
	if n := jobsInStream(ctx, t, c.coord); n != 1 {
		t.Errorf("%d jobs in the stream after the attacks, want the 1 queued", n)
	}
	if _, err := c.coord.JetStream().Consumer(ctx, bus.JobsStream, bus.ConsumerName("default")); err != nil {
		t.Errorf("job consumer after the attacks: %v", err)
	}
	if _, err := c.coord.JetStream().Stream(ctx, bus.EventsStream); err != nil {
		t.Errorf("events stream after the attacks: %v", err)
	}
}

// TestCredentialsRequired: no credentials and a wrong password are refused.
func TestCredentialsRequired(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	for name, opts := range map[string][]nats.Option{
		"none":           nil,
		"wrong password": {nats.UserInfo("worker", "guess")},
		"unknown user":   {nats.UserInfo("admin", "admin")},
	} {
		nc, err := nats.Connect(c.srv.ClientURL(), append(opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
		if strings.Contains(err.Error(), "guess") {
			t.Errorf("%s: the error quotes the password", name)
		}
	}
}

// TestWorkerBindsOnceDeclared: a worker that starts before the coordinator
// waits for the streams instead of failing (bus.Config.Bind).
func TestWorkerBindsOnceDeclared(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	users, err := natsauth.ServerUsers([]natsauth.User{
		{Name: "coordinator", Password: "coord-pw", Role: natsauth.RoleCoordinator},
		{Name: "worker", Password: "worker-pw", Role: natsauth.RoleWorker},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := embedded.Start(ctx, embedded.Options{StoreDir: t.TempDir(), Port: -1, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c := &cluster{srv: srv}
	var v violations
	wnc := c.worker(t, &v)
	bound := make(chan error, 1)
	go func() {
		_, err := bus.New(ctx, wnc, bus.Config{Bind: true})
		bound <- err
	}()
	select {
	case err := <-bound:
		t.Fatalf("the worker bound before any stream existed: %v", err)
	default:
	}
	nc, err := srv.Connect(nats.UserInfo("coordinator", "coord-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := bus.New(ctx, nc, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bound:
		if err != nil {
			t.Fatalf("worker bind after the coordinator declared: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the worker never bound")
	}
}
