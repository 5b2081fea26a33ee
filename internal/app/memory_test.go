package app_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/sqlitemem"
	"github.com/rath-run/rath/pkg/session"
)

// TestDevMemoryAcrossRuns: two separate dev stacks over the same state
// directory (as two `rathctl dev` sessions); the first run commits to
// `memory: local`, the second recalls it. The recall is in the second
// run's transcript and names the version the first run committed.
func TestDevMemoryAcrossRuns(t *testing.T) { checkMemoryAcrossRuns(t, "") }

// TestDevMemoryAcrossRunsPostgres: the same with the cluster's store, where
// memory lives in the Postgres database.
func TestDevMemoryAcrossRunsPostgres(t *testing.T) { checkMemoryAcrossRuns(t, testdb.Postgres(t)) }

func checkMemoryAcrossRuns(t *testing.T, storeURL string) {
	dir := t.TempDir()
	const spec = `{"name":"rememberer","model":"scripted","memory":{"store":"local","commit":true},"script":[{"content":"Noted."}]}`
	run := func(message string) (runs.Run, []session.Chunk) {
		d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: storeURL})
		if err != nil {
			t.Fatalf("start dev stack: %v", err)
		}
		defer d.Close()
		cl, err := client.New(d.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		s := &stack{dev: d, cl: cl}
		r := s.waitRun(t, s.submit(t, spec, message).ID)
		if r.Status != runs.RunSucceeded || r.Output == nil {
			t.Fatalf("run ended %s (%s)", r.Status, r.Error)
		}
		out, err := session.Open(context.Background(), d.Backend.Store, *r.Output)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := out.Chunks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return r, chunks
	}
	r1, c1 := run("My favorite color is teal.")
	// The first run consulted an empty memory: recorded, with no hits.
	if got := kindsOf(c1); got != "user,memory_recall,assistant" || !strings.Contains(string(c1[1].Payload()), `"hits":[]`) {
		t.Fatalf("first run: %s %s", got, c1[1].Payload())
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.db")); (err != nil) != (storeURL != "") {
		t.Fatalf("memory.db under the state dir: %v (store %q)", err, storeURL)
	}
	_, c2 := run("What is my favorite color?")
	if got := kindsOf(c2); got != "user,memory_recall,assistant" {
		t.Fatalf("second run: %s", got)
	}
	var body agent.RecallBody
	if err := json.Unmarshal(c2[1].Payload(), &body); err != nil {
		t.Fatal(err)
	}
	v1 := r1.Output.String()
	if len(body.Hits) != 1 || body.Namespace != memory.DefaultNamespace {
		t.Fatalf("recall: %+v", body)
	}
	h := body.Hits[0]
	if h.VersionID != v1 || h.URI != "memory://session/"+v1+"/transcript" || !strings.Contains(h.Snippet, "teal") {
		t.Fatalf("hit %+v, want the item written by the first run's version %s", h, v1)
	}
}

func TestMemoryPath(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite:.rath/rath.db":    filepath.Join(".rath", "memory.db"),
		"sqlite:///tmp/x/rath.db": filepath.Join("/tmp/x", "memory.db"),
		"sqlite::memory:":         ":memory:",
		"postgres://h/db":         "",
	} {
		if got := app.MemoryPath(in); got != want {
			t.Errorf("MemoryPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func kindsOf(chunks []session.Chunk) string {
	ks := make([]string, len(chunks))
	for i, c := range chunks {
		ks[i] = string(c.Kind())
	}
	return strings.Join(ks, ",")
}

// TestDevMemoryUnknownStore: a store name the deployment does not serve
// fails the step permanently, naming the field.
func TestDevMemoryUnknownStore(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{})
	r := s.waitRun(t, s.submit(t, `{"name":"a","model":"scripted","memory":"remote","script":[{"content":"x"}]}`, "hi").ID)
	if r.Status == runs.RunSucceeded || !strings.Contains(r.Error, `memory.store "remote"`) {
		t.Fatalf("run %s: %q", r.Status, r.Error)
	}
}

// TestEmbeddingMemory: RATH_EMBEDDING_MODEL turns on embedding recall over
// the resolved endpoint; unset leaves BM25; an unresolvable model is an
// error naming the variable.
func TestEmbeddingMemory(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitemem.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Remember(ctx, "", memory.Write{URI: "memory://user/pet", Text: "The cat sleeps."}); err != nil {
		t.Fatal(err)
	}
	if got, err := app.EmbeddingMemory(st, func(string) string { return "" }); err != nil || got != memory.Store(st) {
		t.Fatalf("unset: %T %v", got, err)
	}
	srv := llmtest.NewEmbeddingServer(t, func(string, string) []float32 { return []float32{1, 0} })
	env := map[string]string{"RATH_EMBEDDING_MODEL": "text-embedding-3-small", "OPENAI_BASE_URL": srv.URL(), "OPENAI_API_KEY": "sk-x"}
	got, err := app.EmbeddingMemory(st, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	sem, ok := got.(*memory.Semantic)
	if !ok {
		t.Fatalf("with RATH_EMBEDDING_MODEL: %T", got)
	}
	if r, err := sem.RecallInfo(ctx, "", memory.Query{Text: "feline"}); err != nil || r.Mode != memory.ModeEmbedding || len(r.Hits) != 1 || srv.Requests() != 2 {
		t.Fatalf("recall: %+v %v (%d requests)", r, err, srv.Requests())
	}
	env["RATH_EMBEDDING_MODEL"] = "scripted"
	if _, err := app.EmbeddingMemory(st, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "RATH_EMBEDDING_MODEL") {
		t.Fatalf("scripted: %v", err)
	}
}
