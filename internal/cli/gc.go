package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
)

// retention opens a second connection to a store target's database for
// the retention functions (gc, pins, redaction); the caller closes it.
func (t target) retention(ctx context.Context) (lineage.Retention, func() error, error) {
	dialect, err := lineage.DialectOf(t.storeURL)
	if err != nil {
		return lineage.Retention{}, nil, &exitError{code: 2, err: err}
	}
	_, db, err := runs.Open(ctx, t.storeURL)
	if err != nil {
		return lineage.Retention{}, nil, err
	}
	return lineage.Retention{DB: db, Dialect: dialect}, db.Close, nil
}

// withRetention wraps a command body that needs the retention functions:
// through the coordinator (t.cl set, ret zero) or over the store's
// database.
func (f *lineageFlags) withRetention(fn func(ctx context.Context, t target, ret lineage.Retention, args []string) error) func(*cobra.Command, []string) error {
	return f.with(func(ctx context.Context, t target, args []string) error {
		if t.cl != nil {
			return fn(ctx, t, lineage.Retention{}, args)
		}
		ret, closeDB, err := t.retention(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = closeDB() }()
		return fn(ctx, t, ret, args)
	})
}

func newGCCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var keep time.Duration
	var dryRun bool
	c := &cobra.Command{
		Use:   "gc --keep DURATION",
		Short: "delete versions nothing keeps: not pinned, not a run's or step's input or output, older than --keep, and no ancestor of a kept version",
		Long: "gc prunes branches no run or pin references, with their chunks and lineage edges, and reports what it freed.\n" +
			"It is the one path past the append-only triggers (Postgres: the rath_gc function and role; see docs/lineage.md).\n" +
			"Versions newer than --keep always stay, so work in progress is safe: pick a horizon longer than any run.\n" +
			"Through a coordinator (POST /v1/admin/gc, an admin token) it prunes only the token's tenant's versions.",
		Args: cobra.NoArgs,
		RunE: f.withRetention(func(ctx context.Context, t target, ret lineage.Retention, _ []string) error {
			if keep <= 0 {
				return &exitError{code: 2, err: errors.New("--keep must be a positive duration, such as 720h")}
			}
			var rep api.GCReport
			var err error
			if t.cl != nil {
				rep, err = t.cl.GC(ctx, keep, dryRun)
			} else {
				rep, err = ret.GC(ctx, time.Now().Add(-keep), dryRun)
			}
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
	var f, uf, lf lineageFlags
	var note string
	pin := &cobra.Command{
		Use:   "pin VERSION",
		Short: "keep VERSION and everything it descends from through gc",
		Args:  cobra.ExactArgs(1),
		RunE: f.withRetention(func(ctx context.Context, t target, ret lineage.Retention, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			reply := api.PinReply{ID: id, Pinned: true, Note: note}
			if t.cl != nil {
				reply, err = t.cl.Pin(ctx, id, note)
			} else {
				err = ret.Pin(ctx, id, note)
			}
			if err != nil {
				return err
			}
			if f.output == "json" {
				return (&printer{env: env}).json(reply)
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
		RunE: uf.withRetention(func(ctx context.Context, t target, ret lineage.Retention, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			reply := api.PinReply{ID: id}
			if t.cl != nil {
				reply, err = t.cl.Unpin(ctx, id)
			} else {
				err = ret.Unpin(ctx, id)
			}
			if err != nil {
				return err
			}
			if uf.output == "json" {
				return (&printer{env: env}).json(reply)
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
		RunE: lf.withRetention(func(ctx context.Context, t target, ret lineage.Retention, _ []string) error {
			var list api.PinList
			var err error
			if t.cl != nil {
				list, err = t.cl.Pins(ctx)
			} else {
				list.Pins, err = ret.Pins(ctx)
			}
			if err != nil {
				return err
			}
			if lf.output == "json" {
				if list.Pins == nil {
					list.Pins = []api.Pin{}
				}
				return (&printer{env: env}).json(list)
			}
			for _, p := range list.Pins {
				fmt.Fprintf(env.Out, "%s  %s\n", p.ID, p.Note)
			}
			return nil
		}),
	}
	lf.register(pins)
	return []*cobra.Command{pin, unpin, pins}
}
