package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rath-run/rath/pkg/openrath"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// importAny imports FILE (a file, a directory of OpenRath transcripts, or
// "-" for stdin) in the given format ("" detects it). Rath session JSONL
// goes to the graph as it is; OpenRath files are converted here, on the
// client, into one session JSONL body holding every session they contain,
// and imported through the same path (all or nothing). The conversion sets
// no version key and no placement, so the API accepts it under any sandbox
// policy. It prints the imported head for Rath JSONL and one version per
// OpenRath session otherwise (a JSON array for a directory or a lineage
// file).
func importAny(ctx context.Context, env *Env, p *printer, g sessionGraph, arg string, format openrath.Format) error {
	var (
		conv *openrath.Converted
		err  error
	)
	many := false
	if st, serr := os.Stat(arg); serr == nil && st.IsDir() {
		if format != "" && format != openrath.FormatTranscript {
			return &exitError{code: 2, err: fmt.Errorf("%s is a directory: only --format %s reads directories", arg, openrath.FormatTranscript)}
		}
		many = true
		conv, err = convertDir(ctx, env, arg)
	} else {
		r := env.In
		if arg != "-" {
			file, oerr := os.Open(arg)
			if oerr != nil {
				return oerr
			}
			defer file.Close()
			r = file
		}
		if format == "" {
			if format, r, err = openrath.Detect(r); err != nil {
				return fmt.Errorf("import %s: %w", arg, err)
			}
		}
		switch format {
		case openrath.FormatRath:
			return p.version(g.Import(ctx, r))
		case openrath.FormatTranscript:
			conv, err = convertTranscript(ctx, env, arg, r)
		case openrath.FormatLineage:
			many = true
			conv, err = convertLineage(ctx, r)
		}
	}
	if err != nil {
		return fmt.Errorf("import %s (%s): %w", arg, format, err)
	}
	var body bytes.Buffer
	if err := conv.WriteJSONL(&body); err != nil {
		return fmt.Errorf("import %s: %w", arg, err)
	}
	if _, err := g.Import(ctx, &body); err != nil {
		return fmt.Errorf("import %s: %w", arg, err)
	}
	infos := make([]store.Info, len(conv.Sessions))
	for i, v := range conv.Sessions {
		infos[i] = store.InfoOf(v)
	}
	if p.f.output == "json" {
		if many {
			return p.json(infos)
		}
		return p.json(infos[0])
	}
	for _, in := range infos {
		if _, err := fmt.Fprintln(env.Out, infoLine(in)); err != nil {
			return err
		}
	}
	return nil
}

func convertTranscript(ctx context.Context, env *Env, name string, r io.Reader) (*openrath.Converted, error) {
	pt, err := openrath.Read(r)
	if err != nil {
		return nil, err
	}
	warnTorn(env, name, pt)
	return openrath.ConvertTranscripts(ctx, []*openrath.Persisted{pt})
}

func convertDir(ctx context.Context, env *Env, dir string) (*openrath.Converted, error) {
	ps, skipped, err := openrath.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		fmt.Fprintf(env.Err, "rathctl: skipped %v\n", s.Err)
	}
	if len(ps) == 0 {
		return nil, errors.New("no readable OpenRath transcripts (<id>.jsonl or <id>.jsonl.__partial__) in the directory")
	}
	for _, pt := range ps {
		warnTorn(env, pt.Path, pt)
	}
	return openrath.ConvertTranscripts(ctx, ps)
}

func convertLineage(ctx context.Context, r io.Reader) (*openrath.Converted, error) {
	recs, err := openrath.ReadLineage(r)
	if err != nil {
		return nil, err
	}
	return openrath.ConvertLineage(ctx, recs)
}

// warnTorn tells the user a transcript's cut-off last line was dropped,
// as OpenRath drops it.
func warnTorn(env *Env, name string, pt *openrath.Persisted) {
	if pt.TornTail > 0 {
		fmt.Fprintf(env.Err, "rathctl: %s: dropped an unterminated last line (%d bytes, a write cut off)\n", name, pt.TornTail)
	}
}

// exportOpenRath writes version id as an OpenRath transcript: the
// version and its ancestry come as session JSONL (from the store or the
// coordinator's export endpoint), are read into memory, and the
// transcript is built from there ([openrath.PersistedOf]).
func exportOpenRath(ctx context.Context, g sessionGraph, id session.ID, w io.Writer) error {
	var buf bytes.Buffer
	if err := g.Export(ctx, id, &buf); err != nil {
		return err
	}
	return openrath.WriteTranscriptOf(ctx, id, &buf, w)
}
