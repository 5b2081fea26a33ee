package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
	"github.com/rath-run/rath/pkg/session"
)

// memoryFlags are the flags of rathctl memory: a coordinator (--server,
// $RATH_SERVER, --token) or a store, as the lineage commands choose, and
// the namespace.
type memoryFlags struct {
	lineageFlags
	namespace string
}

// openMemory opens the memory store beside the store a store target names:
// the memory.db file next to a sqlite: store (.rath/memory.db by default,
// the one `memory: local` uses under rathctl dev), or the Postgres
// database.
func openMemory(ctx context.Context, url string) (memory.Store, error) {
	if p := app.MemoryPath(url); p != "" {
		return sqlitemem.Open(ctx, p)
	}
	return pgmem.Open(ctx, url)
}

// with wraps a memory command body: mem is the coordinator's memory
// (client.Memory, t.cl set) or the store's.
func (f *memoryFlags) with(fn func(ctx context.Context, t target, mem memory.Store, args []string) error) func(*cobra.Command, []string) error {
	return f.lineageFlags.with(func(ctx context.Context, t target, args []string) error {
		var mem memory.Store
		if t.cl != nil {
			mem = t.cl.Memory()
		} else {
			st, err := openMemory(ctx, t.storeURL)
			if err != nil {
				return err
			}
			defer st.Close()
			mem = st
		}
		err := fn(ctx, t, mem, args)
		if memory.IsKind(err, memory.KindInvalidURI) || memory.IsKind(err, memory.KindInvalidArgument) || memory.IsKind(err, memory.KindTooLarge) {
			return &exitError{code: 2, err: err}
		}
		if memory.IsKind(err, memory.KindNotFound) && !errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("%w (%w)", err, session.ErrNotFound)
		}
		return err
	})
}

func newMemoryCmd(env *Env) *cobra.Command {
	var f memoryFlags
	c := &cobra.Command{
		Use:   "memory",
		Short: "remember, recall, list, show, delete and commit memory items (the store agents' memory: local binds)",
	}
	f.register(c)
	c.PersistentFlags().StringVar(&f.namespace, "namespace", "", "namespace (default "+memory.DefaultNamespace+")")

	var meta []string
	var version string
	remember := &cobra.Command{
		Use:   "remember URI [TEXT]",
		Short: "write an item (TEXT, or standard input when omitted or -)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: f.with(func(ctx context.Context, _ target, st memory.Store, args []string) error {
			var text string
			if len(args) == 2 && args[1] != "-" {
				text = args[1]
			} else {
				b, err := io.ReadAll(io.LimitReader(env.In, memory.MaxTextBytes+1))
				if err != nil {
					return fmt.Errorf("read text: %w", err)
				}
				text = string(b)
			}
			md := map[string]string{}
			for _, kv := range meta {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return &exitError{code: 2, err: fmt.Errorf("--meta %q: want key=value", kv)}
				}
				md[k] = v
			}
			it, err := st.Remember(ctx, f.namespace, memory.Write{URI: args[0], Text: text, Metadata: md, VersionID: version})
			if err != nil {
				return err
			}
			return f.print(env, it, func(w io.Writer) {
				fmt.Fprintf(w, "remembered %s (%d bytes) in %s\n", it.URI, len(it.Text), it.Namespace)
			})
		}),
	}
	remember.Flags().StringArrayVar(&meta, "meta", nil, "metadata key=value (repeatable)")
	remember.Flags().StringVar(&version, "version", "", "session version id to record as the writer")

	var topK int
	var scope string
	recall := &cobra.Command{
		Use:   "recall QUERY",
		Short: "rank items by BM25 against QUERY (OpenRath's scoring)",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, _ target, st memory.Store, args []string) error {
			hits, err := st.Recall(ctx, f.namespace, memory.Query{Text: args[0], TopK: topK, Scope: scope})
			if err != nil {
				return err
			}
			return f.print(env, api.RecallReply{Hits: nonNilSlice(hits)}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SCORE\tURI\tWRITTEN BY\tSNIPPET")
				for _, h := range hits {
					fmt.Fprintf(tw, "%.3f\t%s\t%s\t%s\n", h.Score, h.URI, cmp.Or(h.VersionID, "-"), oneLine(h.Snippet, 60))
				}
				tw.Flush()
			})
		}),
	}
	recall.Flags().IntVarP(&topK, "top-k", "k", memory.DefaultTopK, "hits to return")
	recall.Flags().StringVar(&scope, "scope", "", "restrict to a scope or directory (memory://user, memory://user/memories/)")

	var deleted bool
	var limit int
	list := &cobra.Command{
		Use:   "list [SCOPE]",
		Short: "list items in URI order",
		Args:  cobra.MaximumNArgs(1),
		RunE: f.with(func(ctx context.Context, _ target, st memory.Store, args []string) error {
			opts := memory.ListOptions{Limit: limit, IncludeDeleted: deleted}
			if len(args) == 1 {
				opts.Scope = args[0]
			}
			items, err := st.List(ctx, f.namespace, opts)
			if err != nil {
				return err
			}
			return f.print(env, api.MemoryList{Items: nonNilSlice(items)}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "URI\tUPDATED\tWRITTEN BY\tTEXT")
				for _, it := range items {
					uri := it.URI
					if !it.DeletedAt.IsZero() {
						uri += " (deleted)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", uri, it.UpdatedAt.Format("2006-01-02T15:04:05Z"), cmp.Or(it.VersionID, "-"), oneLine(it.Text, 50))
				}
				tw.Flush()
			})
		}),
	}
	list.Flags().BoolVar(&deleted, "deleted", false, "include tombstones of deleted items")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many items (0: all)")

	show := &cobra.Command{
		Use:   "show URI",
		Short: "print an item with its provenance",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, _ target, st memory.Store, args []string) error {
			it, err := st.Read(ctx, f.namespace, args[0])
			if err != nil {
				return err
			}
			return f.print(env, it, func(w io.Writer) {
				fmt.Fprintf(w, "uri:        %s\nnamespace:  %s\nwritten by: %s\ncreated:    %s\nupdated:    %s\n",
					it.URI, it.Namespace, cmp.Or(it.VersionID, "-"), it.CreatedAt.Format("2006-01-02T15:04:05.000000Z"), it.UpdatedAt.Format("2006-01-02T15:04:05.000000Z"))
				for k, v := range it.Metadata {
					fmt.Fprintf(w, "meta:       %s=%s\n", k, v)
				}
				fmt.Fprintf(w, "\n%s\n", it.Text)
			})
		}),
	}

	var delVersion string
	del := &cobra.Command{
		Use:   "delete URI",
		Short: "delete an item (a tombstone stays: list --deleted shows it)",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, _ target, st memory.Store, args []string) error {
			if err := st.Delete(ctx, f.namespace, args[0], delVersion); err != nil {
				return err
			}
			ns := cmp.Or(f.namespace, memory.DefaultNamespace)
			return f.print(env, api.MemoryDeleteReply{Namespace: ns, Deleted: args[0]}, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", args[0]) })
		}),
	}
	del.Flags().StringVar(&delVersion, "version", "", "session version id to record as the deleter")

	var (
		agentName, model, provider string
		extract                    bool
	)
	commit := &cobra.Command{
		Use:   "commit SESSION_VERSION_ID",
		Short: "archive a session version's transcript into memory (memory://session/ID/transcript, written by that version), as an agent's commit: true does",
		Args:  cobra.ExactArgs(1),
		RunE: f.with(func(ctx context.Context, t target, mem memory.Store, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if t.cl != nil && !extract {
				if model != "" || provider != "" {
					return &exitError{code: 2, err: errors.New("--model and --provider need --extract")}
				}
				res, err := t.cl.Memory().Commit(ctx, f.namespace, id.String(), agentName)
				if err != nil {
					return err
				}
				return f.print(env, res, func(w io.Writer) {
					it := res.Transcript
					fmt.Fprintf(w, "committed %s (%d bytes) in %s, written by %s\n", it.URI, len(it.Text), it.Namespace, it.VersionID)
				})
			}
			// Through a coordinator, --extract runs the model here, on the
			// transcript read through the API, and remembers each memo
			// through it.
			var g session.Graph = t.st
			if t.cl != nil {
				g = t.cl.Graph()
			}
			out, err := session.Open(ctx, g, id)
			if err != nil {
				return err
			}
			if !extract {
				if model != "" || provider != "" {
					return &exitError{code: 2, err: errors.New("--model and --provider need --extract")}
				}
				it, err := agent.CommitTranscript(ctx, mem, f.namespace, out, agentName)
				if err != nil {
					return err
				}
				return f.print(env, api.MemoryCommitReply{Transcript: it}, func(w io.Writer) {
					fmt.Fprintf(w, "committed %s (%d bytes) in %s, written by %s\n", it.URI, len(it.Text), it.Namespace, it.VersionID)
				})
			}
			p, resolved, err := llm.Resolve(llm.ProviderSpec{Name: provider}, model, os.Getenv)
			if err != nil {
				return fmt.Errorf("memory commit --extract: %w", err)
			}
			res, err := agent.Commit(ctx, mem, f.namespace, out, agentName, &agent.Extractor{Provider: p, Model: resolved})
			if err != nil {
				return err
			}
			if res.Warning != "" {
				fmt.Fprintf(env.Err, "warning: %s\n", res.Warning)
			}
			return f.print(env, api.MemoryCommitReply{Transcript: res.Transcript, Memos: res.Memos, Warning: res.Warning}, func(w io.Writer) {
				it := res.Transcript
				fmt.Fprintf(w, "committed %s (%d bytes) in %s, written by %s\n", it.URI, len(it.Text), it.Namespace, it.VersionID)
				for _, m := range res.Memos {
					fmt.Fprintf(w, "memo %s: %s\n", m.URI, oneLine(m.Text, 100))
				}
			})
		}),
	}
	commit.Flags().StringVar(&agentName, "agent", "", "agent name to record in the item's metadata (default: the version's producer)")
	commit.Flags().BoolVar(&extract, "extract", false, "also ask a chat model for short memos and remember each (memory://session/ID/memos/N, metadata source=extraction); -o json prints {transcript, memos, warning}")
	commit.Flags().StringVar(&model, "model", "", "the extraction's chat model (resolved as agents' models are: OPENAI_BASE_URL/OPENAI_API_KEY, the config file, …)")
	commit.Flags().StringVar(&provider, "provider", "", "a provider entry of the config file for --extract")

	c.AddCommand(remember, recall, list, show, del, commit)
	return c
}

func (f *memoryFlags) print(env *Env, v any, text func(io.Writer)) error {
	if f.output == "json" {
		enc := json.NewEncoder(env.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(env.Out)
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
