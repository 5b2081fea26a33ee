package app

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// Main is the main function of a Rath command: it calls run with the
// command-line arguments under a context canceled on SIGINT or SIGTERM,
// and when run fails prints "name: error" to stderr and exits 1.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// StoreNATS holds the --store and --nats flags the coordinator and the
// worker share; read it after the flag set is parsed.
type StoreNATS struct {
	// StoreURL is --store, default $RATH_STORE.
	StoreURL string
	// NATSURL is --nats, default $NATS_URL or nats://127.0.0.1:4222.
	NATSURL string
}

// StoreNATSFlags defines --store and --nats on fs, their defaults taken from
// RATH_STORE and NATS_URL.
func StoreNATSFlags(fs *flag.FlagSet) *StoreNATS {
	f := &StoreNATS{}
	fs.StringVar(&f.StoreURL, "store", os.Getenv("RATH_STORE"), "store URL (postgres://… or sqlite:PATH)")
	fs.StringVar(&f.NATSURL, "nats", cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL), "NATS server URL")
	return f
}

// Check reports a missing store URL.
func (f *StoreNATS) Check() error {
	if f.StoreURL == "" {
		return errors.New("--store (or RATH_STORE) is required")
	}
	return nil
}

// NATSConnector returns a [BackendConfig.Connect] that dials url as client
// name, reconnecting forever every 250ms.
func NATSConnector(url, name string) func() (*nats.Conn, error) {
	return func() (*nats.Conn, error) {
		return nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	}
}
