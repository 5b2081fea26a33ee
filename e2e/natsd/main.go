// Command natsd is a nats-server with JetStream built from the
// nats-server/v2 module this repository depends on, for the e2e tests: the
// same server code a deployment runs, as a separate process that a test
// can stop and restart on the same port and store.
//
//	natsd -port 4222 -store DIR
//
// With RATH_NATSD_USERS set ("name:role:password,…", roles coordinator and
// worker; package natsauth), the server accepts only those users, each with
// its role's subject permissions. The variable keeps passwords off the
// command line.
//
// It runs until SIGINT or SIGTERM, then shuts down cleanly (flushing its
// store), and prints "ready nats://HOST:PORT" on stdout once it accepts
// connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rath-run/rath/internal/bus/embedded"
	"github.com/rath-run/rath/internal/natsauth"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
}

func run() error {
	port := flag.Int("port", -1, "client port (-1: pick a free one)")
	host := flag.String("host", "127.0.0.1", "listen host")
	dir := flag.String("store", "", "JetStream store directory (required)")
	flag.Parse()
	if *dir == "" {
		return fmt.Errorf("-store is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var users []*server.User
	if spec := os.Getenv("RATH_NATSD_USERS"); spec != "" {
		list, err := natsauth.ParseUsers(spec)
		if err != nil {
			return err
		}
		if users, err = natsauth.ServerUsers(list); err != nil {
			return err
		}
	}
	srv, err := embedded.Start(sctx, embedded.Options{StoreDir: *dir, Host: *host, Port: *port, ServerName: "rath-e2e", Users: users})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, "ready", srv.ClientURL())
	<-ctx.Done()
	srv.Shutdown()
	return nil
}
