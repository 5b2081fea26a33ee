package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/replay"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

func newReplayCmd(env *Env) *cobra.Command {
	var f lineageFlags
	var strict bool
	var runID string
	c := &cobra.Command{
		Use:   "replay VERSION | replay --run RUN",
		Short: "re-execute the agent step that made VERSION with its recorded model replies and tool results, into a new replay version, and compare hashes",
		Long: "replay answers the step's model calls from the recording (pkg/llm Replay) and its tool calls with the recorded\n" +
			"results, so no model is called and no tool runs again. The new version (op replay) branches from the step's input;\n" +
			"the original is untouched. --strict fails (exit 1, nothing committed) on any divergence. Through a coordinator\n" +
			"(--server) the replay runs in the coordinator (POST /v1/versions/{id}/replay).\n\n" +
			"replay --run RUN re-executes every step of workflow run RUN the same way, in the order the steps were recorded:\n" +
			"agent steps from their recorded replies and tool results, selector steps from their recorded decisions,\n" +
			"compressions from their recorded summaries, and the forks and merges between them from the graph, into a new\n" +
			"replay branch (the run is untouched). It prints one row per step and fan-in merge with whether its chunk hashes\n" +
			"came out identical; --strict stops at, and fails (exit 1) on, the first difference, naming the step key, round\n" +
			"and message. Through a coordinator it runs there (POST /v1/runs/{id}/replay).",
		Args: cobra.RangeArgs(0, 1),
		RunE: f.with(func(ctx context.Context, t target, args []string) error {
			switch {
			case runID != "" && len(args) == 1:
				return &exitError{code: 2, err: errors.New("give VERSION or --run RUN, not both")}
			case runID != "":
				return replayRunCmd(ctx, env, t, f.output, runID, strict)
			case len(args) == 0:
				return &exitError{code: 2, err: errors.New("give VERSION (one step) or --run RUN (a whole workflow run)")}
			}
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
	c.Flags().StringVar(&runID, "run", "", "replay every step of this workflow run into a new replay branch")
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

// replayRunCmd replays every step of workflow run runID (through the
// coordinator, or on the store t names) and prints the report; a
// divergence under strict is exit 1.
func replayRunCmd(ctx context.Context, env *Env, t target, output, runID string, strict bool) error {
	var rep api.RunReplayReport
	var err error
	if t.cl != nil {
		if rep, err = t.cl.ReplayRun(ctx, runID, api.RunReplayRequest{Strict: strict}); err != nil {
			return err
		}
	} else {
		rs, db, oerr := runs.Open(ctx, t.storeURL)
		if oerr != nil {
			return oerr
		}
		defer db.Close()
		rec, lerr := replay.LoadRun(ctx, rs, runID)
		if lerr != nil {
			return lerr
		}
		if rep, err = replay.Run(ctx, t.st, rec, replay.Options{Strict: strict, Worker: "rathctl-replay"}); err != nil && !errors.Is(err, replay.ErrDiverged) {
			return err
		}
	}
	if output == "json" {
		if perr := (&printer{env: env}).json(rep); perr != nil {
			return perr
		}
	} else {
		writeRunReplay(env.Out, rep)
	}
	if strict && !rep.Identical {
		return &exitError{code: 1, err: fmt.Errorf("%w: %s", replay.ErrDiverged, rep.Diverged)}
	}
	return nil
}

// writeRunReplay prints a whole-run replay as a table.
func writeRunReplay(w io.Writer, rep api.RunReplayReport) {
	fmt.Fprintf(w, "replay of run %s: output %s, replay %s, identical=%v\n", rep.Run, idOrDash(rep.Output), idOrDash(rep.Replay), rep.Identical)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tKIND\tORIGINAL\tREPLAY\tCHUNKS\tIDENTICAL\tDIVERGENCE")
	for _, s := range rep.Steps {
		d := "-"
		if len(s.Divergences) > 0 {
			d = s.Divergences[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%v\t%s\n", dash(s.Key), s.Kind, s.Original, idOrDash(s.Replay), s.Chunks, s.Identical, d)
	}
	_ = tw.Flush()
}

func idOrDash(id *session.ID) string {
	if id == nil {
		return "-"
	}
	return id.String()
}
