package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/session"
)

func newDemoCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "build a small session graph in memory and print it as a tree",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g := session.NewMemoryGraph()
			if err := sessionDemo(cmd.Context(), g); err != nil {
				return err
			}
			return printTree(env.Out, g.Versions())
		},
	}
}

// sessionDemo builds a root, forks three branches, appends to them, merges
// two and detaches one.
func sessionDemo(ctx context.Context, g session.Graph) error {
	root, err := session.FromUserMessage(ctx, g, "Plan a three-day trip to Kyoto.")
	if err != nil {
		return err
	}
	var branches [3]session.Session
	replies := []string{"Day 1: Fushimi Inari at dawn.", "Day 1: Arashiyama bamboo grove.", "Day 1: Nishiki market food tour."}
	for i := range branches {
		b, err := root.Fork(ctx)
		if err != nil {
			return err
		}
		if branches[i], err = b.Append(ctx, session.Assistant(replies[i])); err != nil {
			return err
		}
	}
	merged, err := branches[0].Merge(ctx, branches[1])
	if err != nil {
		return err
	}
	if _, err = merged.Append(ctx, session.User("Combine the best of both.")); err != nil {
		return err
	}
	_, err = branches[2].Detach(ctx)
	return err
}

// printTree prints versions as an indented tree along first parents; roots
// (creates and detaches) start at the left margin, and a merge's other
// parents are named on its line.
func printTree(w io.Writer, vs []*session.Version) error {
	children := make(map[session.ID][]*session.Version)
	var roots []*session.Version
	for _, v := range vs {
		if len(v.Parents) == 0 {
			roots = append(roots, v)
			continue
		}
		children[v.Parents[0]] = append(children[v.Parents[0]], v)
	}
	var walk func(v *session.Version, depth int) error
	walk = func(v *session.Version, depth int) error {
		line := fmt.Sprintf("%s%s  %-7s chunks=%d", strings.Repeat("  ", depth), v.ID, v.Op, v.Len)
		if len(v.Parents) > 1 {
			line += fmt.Sprintf("  +parent %s", v.Parents[1])
		}
		if v.Op == session.OpDetach && v.Base != nil {
			line += fmt.Sprintf("  (rows of %s)", *v.Base)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		for _, c := range children[v.ID] {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := walk(r, 0); err != nil {
			return err
		}
	}
	return nil
}
