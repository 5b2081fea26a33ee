// Command coordinator serves Rath's HTTP API, publishes step jobs to
// JetStream and reconciles lost steps. Configuration comes from flags and
// the environment:
//
//	RATH_STORE       store URL (postgres://… or sqlite:PATH)      --store
//	NATS_URL         NATS server URL (default nats://127.0.0.1:4222) --nats
//	RATH_ADDR        listen address (default :7420)                --addr
//	RATH_TOKEN       bearer token required on /v1 (optional)
//
// `coordinator migrate` applies the migrations and exits.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/coordinator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	storeURL := fs.String("store", os.Getenv("RATH_STORE"), "store URL (postgres://… or sqlite:PATH)")
	natsURL := fs.String("nats", cmp.Or(os.Getenv("NATS_URL"), nats.DefaultURL), "NATS server URL")
	addr := fs.String("addr", cmp.Or(os.Getenv("RATH_ADDR"), ":7420"), "listen address")
	interval := fs.Duration("reconcile-interval", 0, "how often the reconciler scans for lost steps (default 10s)")
	staleAfter := fs.Duration("stale-after", 0, "how long an unfinished step may go untouched before it is reconciled (default 2m)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *storeURL == "" {
		return errors.New("--store (or RATH_STORE) is required")
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	b, err := app.OpenBackend(ctx, app.BackendConfig{
		StoreURL: *storeURL,
		Connect: func() (*nats.Conn, error) {
			return nats.Connect(*natsURL, nats.Name("rath-coordinator"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
		},
		Migrate: true,
		Logger:  log,
	})
	if err != nil {
		return err
	}
	defer b.Close()
	if fs.Arg(0) == "migrate" {
		log.Info("migrations applied")
		return nil
	}
	c, err := coordinator.New(b.Store, b.Runs, b.Bus, coordinator.Config{
		Token: os.Getenv("RATH_TOKEN"), ReconcileInterval: *interval, StaleAfter: *staleAfter, Logger: log,
		// OpenBackend opens the graph and run stores from one URL.
		SameDatabase: b.SubmitInOneTx(),
	})
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: *addr, Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.RunReconciler(ctx) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("coordinator listening", slog.String("addr", *addr))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
