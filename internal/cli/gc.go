package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/store"
)

// withRetention opens the store (migrated) and a second connection to its
// database for the retention functions.
func (f *storeFlags) withRetention(fn func(ctx context.Context, st store.Store, ret lineage.Retention, args []string) error) func(*cobra.Command, []string) error {
	return f.withStore(func(ctx context.Context, st store.Store, args []string) error {
		url := storeURLOf(*f)
		dialect, err := lineage.DialectOf(url)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		_, db, err := runs.Open(ctx, url)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(ctx, st, lineage.Retention{DB: db, Dialect: dialect}, args)
	})
}

func newGCCmd(env *Env) *cobra.Command {
	var f storeFlags
	var keep time.Duration
	var dryRun bool
	c := &cobra.Command{
		Use:   "gc --keep DURATION",
		Short: "delete versions nothing keeps: not pinned, not a run's or step's input or output, older than --keep, and no ancestor of a kept version",
		Long: "gc prunes branches no run or pin references, with their chunks and lineage edges, and reports what it freed.\n" +
			"It is the one path past the append-only triggers (Postgres: the rath_gc function and role; see docs/lineage.md).\n" +
			"Versions newer than --keep always stay, so work in progress is safe: pick a horizon longer than any run.",
		Args: cobra.NoArgs,
		RunE: f.withRetention(func(ctx context.Context, _ store.Store, ret lineage.Retention, _ []string) error {
			if keep <= 0 {
				return &exitError{code: 2, err: errors.New("--keep must be a positive duration, such as 720h")}
			}
			rep, err := ret.GC(ctx, time.Now().Add(-keep), dryRun)
			if err != nil {
				return err
			}
			if f.output == "json" {
				return (&printer{env: env}).json(rep)
			}
			verb := "freed"
			if dryRun {
				verb = "would free"
			}
			_, err = fmt.Fprintf(env.Out, "%s %d versions, %d chunks, %d edges (%d bytes)\n", verb, rep.Versions, rep.Chunks, rep.Edges, rep.Bytes)
			return err
		}),
	}
	f.register(c)
	c.Flags().DurationVar(&keep, "keep", 0, "keep every version newer than this (required)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be freed, delete nothing")
	return c
}

func newPinCmds(env *Env) []*cobra.Command {
	var f, uf, lf storeFlags
	var note string
	pin := &cobra.Command{
		Use:   "pin VERSION",
		Short: "keep VERSION and everything it descends from through gc",
		Args:  cobra.ExactArgs(1),
		RunE: f.withRetention(func(ctx context.Context, _ store.Store, ret lineage.Retention, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := ret.Pin(ctx, id, note); err != nil {
				return err
			}
			_, err = fmt.Fprintln(env.Out, "pinned", id)
			return err
		}),
	}
	f.register(pin)
	pin.Flags().StringVar(&note, "note", "", "why it is kept")
	unpin := &cobra.Command{
		Use:   "unpin VERSION",
		Short: "remove VERSION's pin (gc may then delete what nothing else keeps)",
		Args:  cobra.ExactArgs(1),
		RunE: uf.withRetention(func(ctx context.Context, _ store.Store, ret lineage.Retention, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := ret.Unpin(ctx, id); err != nil {
				return err
			}
			_, err = fmt.Fprintln(env.Out, "unpinned", id)
			return err
		}),
	}
	uf.register(unpin)
	pins := &cobra.Command{
		Use:   "pins",
		Short: "list pinned versions",
		Args:  cobra.NoArgs,
		RunE: lf.withRetention(func(ctx context.Context, _ store.Store, ret lineage.Retention, _ []string) error {
			ps, err := ret.Pins(ctx)
			if err != nil {
				return err
			}
			if lf.output == "json" {
				if ps == nil {
					ps = []lineage.Pin{}
				}
				return (&printer{env: env}).json(map[string]any{"pins": ps})
			}
			for _, p := range ps {
				fmt.Fprintf(env.Out, "%s  %s\n", p.ID, p.Note)
			}
			return nil
		}),
	}
	lf.register(pins)
	return []*cobra.Command{pin, unpin, pins}
}
