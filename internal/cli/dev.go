package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/telemetry"
)

// devStarted is what `rathctl dev -o json` prints once the stack is up.
type devStarted struct {
	URL     string `json:"url"`
	Dir     string `json:"dir"`
	UI      string `json:"ui"`
	Metrics string `json:"metrics"`
}

func newDevCmd(env *Env) *cobra.Command {
	var cfg app.DevConfig
	var verbose bool
	var output string
	c := &cobra.Command{
		Use:   "dev",
		Short: "run the whole system in one process: embedded NATS, embedded store, coordinator API, workers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			cfg.Logger = telemetry.NewLogger(env.Err, telemetry.LogText, level)
			cfg.Getenv = os.Getenv
			ctx := cmd.Context()
			tp, shutdown, err := telemetry.NewTracerProvider(ctx, telemetry.TraceConfig{ServiceName: "rath-dev", Getenv: os.Getenv})
			if err != nil {
				return err
			}
			defer func() { _ = shutdown(context.WithoutCancel(ctx)) }()
			cfg.TracerProvider = tp
			cfg.JaegerURL = os.Getenv("RATH_JAEGER_URL")
			d, err := app.StartDev(ctx, cfg)
			if err != nil {
				return err
			}
			defer d.Close()
			if output == "json" {
				// One line a script can read for the address, then nothing
				// until it stops.
				if err := json.NewEncoder(env.Out).Encode(devStarted{URL: d.URL, Dir: cfg.Dir, UI: d.URL + "/ui/", Metrics: d.URL + "/metrics"}); err != nil {
					return err
				}
				<-ctx.Done()
				return nil
			}
			fmt.Fprintf(env.Out, "rath dev: coordinator API on %s (state in %s); Ctrl-C to stop\n", d.URL, cfg.Dir)
			fmt.Fprintf(env.Out, "web UI: %s/ui/  metrics: %s/metrics\n", d.URL, d.URL)
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
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json (one line: the coordinator's url, dir, ui, metrics)")
	return c
}
