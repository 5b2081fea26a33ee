package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/app"
)

func newDevCmd(env *Env) *cobra.Command {
	var cfg app.DevConfig
	var verbose bool
	c := &cobra.Command{
		Use:   "dev",
		Short: "run the whole system in one process: embedded NATS, embedded store, coordinator API, workers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = slog.New(slog.NewTextHandler(env.Err, &slog.HandlerOptions{Level: level}))
			cfg.Getenv = os.Getenv
			ctx := cmd.Context()
			d, err := app.StartDev(ctx, cfg)
			if err != nil {
				return err
			}
			defer d.Close()
			fmt.Fprintf(env.Out, "rath dev: coordinator API on %s (state in %s); Ctrl-C to stop\n", d.URL, cfg.Dir)
			fmt.Fprintf(env.Out, "try: rathctl run --server %s --agent examples/agents/planner.yaml --message 'Plan a trip' --watch\n", d.URL)
			<-ctx.Done()
			fmt.Fprintln(env.Out, "rath dev: stopping")
			return nil
		},
	}
	c.Flags().StringVar(&cfg.Addr, "addr", "127.0.0.1:7420", "coordinator API listen address")
	c.Flags().StringVar(&cfg.Dir, "dir", ".rath", "state directory (embedded store and JetStream)")
	c.Flags().StringVar(&cfg.StoreURL, "store", "", "store URL instead of the embedded one (postgres://… or sqlite:PATH)")
	c.Flags().IntVar(&cfg.Workers, "workers", 2, "in-process workers")
	c.Flags().IntVar(&cfg.Slots, "slots", 4, "concurrent steps per worker")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "log at info level")
	return c
}
