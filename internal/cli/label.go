package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/trainset"
)

func newLabelCmd(env *Env) *cobra.Command {
	var f sessionFlags
	var score float64
	var prefer bool
	var by, note string
	c := &cobra.Command{
		Use:   "label VERSION --score X | --prefer",
		Short: "record a human (or verifier) label on a trajectory's end, for rathctl export pairs",
		Long: "label appends a version to VERSION holding one note chunk {\"rath_label\": {...}}: the label is part of the hash\n" +
			"chain, belongs to VERSION's tenant and travels with session export/import. Label versions are never exported as\n" +
			"trajectories; rathctl export pairs ranks sibling branches by their last label (a preference first, then the score).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			scored := cmd.Flags().Changed("score")
			if !scored && !prefer {
				return &exitError{code: 2, err: errors.New("give --score X, --prefer or both")}
			}
			l := trainset.Label{Prefer: prefer, By: by, Note: note}
			if scored {
				l.Score = &score
			}
			chunk, err := trainset.LabelChunk(l)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--score: %w", err)}
			}
			return labelOn(ctx, env, &f, id, chunk)
		},
	}
	f.register(c)
	c.Flags().Float64Var(&score, "score", 0, "the trajectory's score (higher is better)")
	c.Flags().BoolVar(&prefer, "prefer", false, "prefer this trajectory over its unpreferred siblings")
	c.Flags().StringVar(&by, "by", "", "who or what labeled")
	c.Flags().StringVar(&note, "note", "", "a free-form note kept with the label")
	return c
}

func labelOn(ctx context.Context, env *Env, f *sessionFlags, id session.ID, chunk session.Chunk) error {
	g, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer g.Close()
	v, err := g.Append(ctx, id, []session.Chunk{chunk})
	if err != nil {
		return err
	}
	if f.output == "json" {
		return (&printer{env: env}).json(v)
	}
	fmt.Fprintf(env.Out, "labeled %s: %s\n", id, v.ID)
	return nil
}
