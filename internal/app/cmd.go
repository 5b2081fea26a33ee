package app

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/gctune"
)

// version is the release a binary was built as, set at link time
// (-ldflags "-X github.com/rath-run/rath/internal/app.version=v1.2.3"; the
// Dockerfile and scripts/images.sh do). Empty: the module's build info.
var version string

// Version returns the binary's version: the link-time version, else the
// main module's version from the build info, with the VCS revision when
// the build recorded one.
func Version() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		v = info.Main.Version
	}
	if ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				v += " (" + s.Value + ")"
			}
		}
	}
	return cmp.Or(v, "(devel)")
}

// Main is the main function of a Rath command: it calls run with the
// command-line arguments under a context canceled on SIGINT or SIGTERM,
// and when run fails prints "name: error" to stderr and exits 1. A first
// argument "version" prints "name VERSION" and exits 0, as -h and --help
// (the flag set's usage) do. "healthcheck URL" GETs URL and exits 0 on a
// 2xx answer, 1 otherwise: the container health check of images that have
// no shell or curl (docker-compose.yml). Before run, the garbage
// collector gets Rath's defaults where GOGC and GOMEMLIMIT are unset
// (package gctune).
func Main(name string, run func(ctx context.Context, args []string) error) {
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Fprintln(os.Stdout, name, Version())
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "healthcheck" {
		if err := Healthcheck(context.Background(), os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			os.Exit(1)
		}
		return
	}
	gctune.Apply(os.Getenv, nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Healthcheck GETs url within 5 seconds and reports an error unless the
// answer is 2xx.
func Healthcheck(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("healthcheck %s: %s", url, resp.Status)
	}
	return nil
}

// CloseWithin closes c, giving up after d: a process on its way out must
// not outlive its grace period because a connection pool waits on a
// connection whose network path silently died (pgxpool.Close waits up to a
// minute for an abandoned health-check ping). Giving up leaves the closing
// to the process exit; the failure is logged.
func CloseWithin(c io.Closer, d time.Duration, log *slog.Logger) {
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("close", slog.Any("error", err))
		}
	case <-t.C:
		log.Warn("close did not finish; exiting without waiting", slog.Duration("waited", d))
	}
}

// StoreNATS holds the --store and --nats flags the coordinator and the
// worker share; read it after the flag set is parsed.
type StoreNATS struct {
	// StoreURL is --store, default $RATH_STORE.
	StoreURL string
	// NATSURL is --nats, default $NATS_URL or nats://127.0.0.1:4222.
	NATSURL string
	// Replicas is --nats-replicas, default $RATH_NATS_REPLICAS or 1: the
	// replica count of the JetStream streams and object store
	// ([bus.Config.Replicas]). Every process declaring the streams must
	// use the same value, or the last to start re-declares them with its
	// own.
	Replicas int
	// EventsMaxBytes is --events-max-bytes, default $RATH_EVENTS_MAX_BYTES
	// or 256MiB, in bytes: the bound of the events stream, whose oldest
	// events go first past it ([bus.Config.EventsMaxBytes]). Like
	// Replicas, every process declaring the streams must use the same
	// value.
	EventsMaxBytes int64

	replicasErr    error
	eventsMaxBytes string
}

// The events bound's default and minimum as --events-max-bytes writes
// them (256MiB, 8MiB), from package bus's.
var (
	defaultEventsMaxBytes = units.BytesSize(bus.DefaultEventsMaxBytes)
	minEventsMaxBytes     = units.BytesSize(bus.MinEventsMaxBytes)
)

// StoreNATSFlags defines --store and --nats on fs, their defaults taken from
// RATH_STORE and NATS_URL.
func StoreNATSFlags(fs *flag.FlagSet) *StoreNATS {
	f := &StoreNATS{}
	fs.StringVar(&f.StoreURL, "store", os.Getenv("RATH_STORE"), "store URL (postgres://… or sqlite:PATH)")
	fs.StringVar(&f.NATSURL, "nats", cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL), "NATS server URL")
	if v := os.Getenv("RATH_NATS_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.replicasErr = fmt.Errorf("RATH_NATS_REPLICAS=%q: want an integer 1..5", v)
		}
		f.Replicas = n
	}
	fs.IntVar(&f.Replicas, "nats-replicas", cmp.Or(f.Replicas, 1), "replicas of the JetStream streams (1..5; 3 on a 3-node NATS cluster)")
	fs.StringVar(&f.eventsMaxBytes, "events-max-bytes", cmp.Or(os.Getenv("RATH_EVENTS_MAX_BYTES"), defaultEventsMaxBytes),
		"bound of the events stream, the oldest events dropped first (e.g. 512MiB, 4GiB; at least "+minEventsMaxBytes+")")
	return f
}

// Check reports a missing store URL, a bad replica count or a bad events
// bound, and sets EventsMaxBytes.
func (f *StoreNATS) Check() error {
	switch {
	case f.StoreURL == "":
		return errors.New("--store (or RATH_STORE) is required")
	case f.replicasErr != nil:
		return f.replicasErr
	case f.Replicas < 1 || f.Replicas > 5:
		return fmt.Errorf("--nats-replicas (or RATH_NATS_REPLICAS) = %d: want 1..5", f.Replicas)
	}
	n, err := units.RAMInBytes(f.eventsMaxBytes)
	if err != nil || n < bus.MinEventsMaxBytes {
		return fmt.Errorf("--events-max-bytes (or RATH_EVENTS_MAX_BYTES) = %q: want a size of at least %s, such as %s",
			f.eventsMaxBytes, minEventsMaxBytes, defaultEventsMaxBytes)
	}
	f.EventsMaxBytes = n
	return nil
}

// NATSConnector returns a [BackendConfig.Connect] that dials url as client
// name with [NATSOptions].
func NATSConnector(url, name string) func() (*nats.Conn, error) {
	return func() (*nats.Conn, error) {
		return nats.Connect(url, NATSOptions(name)...)
	}
}

// NATSOptions are the connection options of Rath's processes: reconnect
// forever every 250ms; ping every 5s and count the connection dead after 3
// unanswered pings, so a process whose network path silently died (a
// partition, a container disconnected and reconnected) reconnects within
// about 20s instead of the client's default 4 minutes, during which a
// worker would pull nothing; and bound Close's drain to 5s, so a draining
// worker exits within its grace period even on a dead connection.
func NATSOptions(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(5 * time.Second), nats.MaxPingsOutstanding(3), nats.DrainTimeout(5 * time.Second),
	}
}
