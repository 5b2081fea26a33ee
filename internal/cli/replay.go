package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/replay"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

func newReplayCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var strict bool
	c := &cobra.Command{
		Use:   "replay VERSION",
		Short: "re-execute the agent step that made VERSION with its recorded model replies and tool results, into a new replay version, and compare hashes",
		Long: "replay answers the step's model calls from the recording (pkg/llm Replay) and its tool calls with the recorded\n" +
			"results, so no model is called and no tool runs again. The new version (op replay) branches from the step's input;\n" +
			"the original is untouched. --strict fails (exit 1, nothing committed) on any divergence. Through a coordinator\n" +
			"(--server) the replay runs in the coordinator (POST /v1/versions/{id}/replay).",
		Args: cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			var rep api.ReplayReport
			if t.cl != nil {
				if rep, err = t.cl.Replay(ctx, id, api.ReplayRequest{Strict: strict}); err != nil {
					return err
				}
				if strict && rep.Replay == nil {
					err = fmt.Errorf("%w: %s", replay.ErrDiverged, strings.Join(rep.Divergences, "; "))
				}
			} else if rep, err = storeReplay(ctx, t, id, strict); err != nil && !errors.Is(err, replay.ErrDiverged) {
				return err
			}
			if f.output == "json" {
				if perr := (&printer{env: env}).json(rep); perr != nil {
					return perr
				}
			} else {
				for _, d := range rep.Divergences {
					fmt.Fprintln(env.Out, "DIVERGED", d)
				}
				if rep.Replay != nil {
					fmt.Fprintf(env.Out, "replay %s of %s: %d chunks, identical=%v\n", rep.Replay, rep.Of, rep.Chunks, rep.Identical)
				}
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			return nil
		}),
	}
	f.register(c)
	c.Flags().BoolVar(&strict, "strict", false, "fail on any divergence from the recording")
	return c
}

// storeReplay replays the step that made id on the store t names, with
// the run store next to it.
func storeReplay(ctx context.Context, t target, id session.ID, strict bool) (api.ReplayReport, error) {
	out, err := session.Open(ctx, t.st, id)
	if err != nil {
		return api.ReplayReport{}, err
	}
	if err := replay.Replayable(out.Version()); err != nil {
		return api.ReplayReport{}, err
	}
	rs, db, err := runs.Open(ctx, t.storeURL)
	if err != nil {
		return api.ReplayReport{}, err
	}
	defer db.Close()
	spec, err := replay.SpecOf(ctx, rs, out.Version())
	if err != nil {
		return api.ReplayReport{}, err
	}
	return replay.Step(ctx, t.st, spec, out, nil, replay.Options{Strict: strict, Worker: "rathctl-replay"})
}
