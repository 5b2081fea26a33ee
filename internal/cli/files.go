package cli

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/workspace"
)

// newSessionFilesCmds returns `session files ID`, `session diff A B` and
// `session cat VERSION PATH`.
// Workspace snapshots live in the coordinator's JetStream object store, so
// these always ask a coordinator (or `rathctl dev`): the session command's
// --server, else RATH_SERVER, else the logged-in server, else
// http://127.0.0.1:7420 (serverTarget). p prints with the
// session command's --output.
func newSessionFilesCmds(p *printer, f *sessionFlags) []*cobra.Command {
	apiClient := func() (*client.Client, error) {
		if f.url != "" {
			return nil, &exitError{code: 2, err: errors.New("workspaces are read through a coordinator: give --server (or RATH_SERVER), not --store")}
		}
		w := serverTarget(f.server, f.token)
		cl, err := client.New(w.server, w.token)
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("--server: %w", err)}
		}
		return cl, nil
	}
	files := &cobra.Command{
		Use:   "files ID",
		Short: "list a version's workspace (its snapshot's files) through the coordinator",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			cl, err := apiClient()
			if err != nil {
				return err
			}
			v, err := cl.Files(cmd.Context(), id)
			if err != nil {
				return err
			}
			return p.files(v)
		},
	}
	diff := &cobra.Command{
		Use:   "diff A B",
		Short: "show which workspace files changed from version A to version B (A added, D removed, M changed)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := parseID(args[0])
			if err != nil {
				return err
			}
			b, err := parseID(args[1])
			if err != nil {
				return err
			}
			cl, err := apiClient()
			if err != nil {
				return err
			}
			v, err := cl.Diff(cmd.Context(), a, b)
			if err != nil {
				return err
			}
			return p.diff(v)
		},
	}
	cat := &cobra.Command{
		Use:   "cat VERSION PATH",
		Short: "print the content of one file of a version's workspace, through the coordinator (up to 8 MiB)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if err := workspace.ValidPath(args[1]); err != nil {
				return &exitError{code: 2, err: fmt.Errorf("PATH: %w", err)}
			}
			cl, err := apiClient()
			if err != nil {
				return err
			}
			fc, err := cl.ReadFile(cmd.Context(), id, args[1])
			if err != nil {
				return err
			}
			if p.f.output == "json" {
				return p.json(fc)
			}
			_, err = p.env.Out.Write(fc.Content)
			return err
		},
	}
	return []*cobra.Command{files, diff, cat}
}

// modeString formats an entry like ls -l: "drwxr-xr-x", "-rw-r--r--",
// "lrwxrwxrwx".
func modeString(e api.FileEntry) string {
	switch e.Type {
	case api.FileTypeDir:
		return "d" + e.Mode.Perm().String()[1:]
	case api.FileTypeSymlink:
		return "lrwxrwxrwx"
	}
	return e.Mode.Perm().String()
}

func (p *printer) files(v *api.FilesView) error {
	if p.f.output == "json" {
		return p.json(v)
	}
	out := p.env.Out
	if v.Snapshot == "" {
		_, err := fmt.Fprintf(out, "%s: empty workspace (no snapshot)\n", v.ID)
		return err
	}
	if _, err := fmt.Fprintf(out, "snapshot %s  %d files, %d bytes\n", v.Snapshot, v.Files, v.Bytes); err != nil {
		return err
	}
	for _, e := range v.Entries {
		var err error
		switch e.Type {
		case api.FileTypeFile:
			_, err = fmt.Fprintf(out, "%s %10d  %s\n", modeString(e), e.Size, e.Path)
		case api.FileTypeDir:
			_, err = fmt.Fprintf(out, "%s %10s  %s/\n", modeString(e), "-", e.Path)
		default:
			_, err = fmt.Fprintf(out, "%s %10s  %s -> %s\n", modeString(e), "-", e.Path, e.Target)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *printer) diff(v *api.DiffView) error {
	if p.f.output == "json" {
		return p.json(v)
	}
	letter := map[api.ChangeKind]string{api.Added: "A", api.Removed: "D", api.Changed: "M"}
	for _, c := range v.Changes {
		suffix := ""
		if e := cmp.Or(c.After, c.Before); e != nil && e.Type == api.FileTypeDir {
			suffix = "/"
		}
		if _, err := fmt.Fprintf(p.env.Out, "%s  %s%s\n", letter[c.Kind], c.Path, suffix); err != nil {
			return err
		}
	}
	return nil
}
