// Command rathctl is Rath's command-line client: it reads and writes the
// Session Graph, submits and watches runs, and runs the whole system on a
// laptop with `rathctl dev`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rath-run/rath/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
