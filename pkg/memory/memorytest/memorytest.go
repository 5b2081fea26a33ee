// Package memorytest is the conformance suite every memory backend runs:
// OpenRath's BM25 fixtures bit for bit, remember/read/list/delete with
// tombstones, scopes, namespaces, bad input, and a randomized cross-check
// of the indexed recall against [memory.RankDocs]'s full scan.
package memorytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/memory"
)

// Open returns a fresh, empty store for t; the suite closes it.
type Open func(t *testing.T) memory.Store

// Run runs the conformance suite.
func Run(t *testing.T, open Open) {
	t.Run("OpenRathFixture", func(t *testing.T) { testFixture(t, open) })
	t.Run("CRUD", func(t *testing.T) { testCRUD(t, open) })
	t.Run("DeleteTombstone", func(t *testing.T) { testDelete(t, open) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, open) })
	t.Run("MatchesFullScan", func(t *testing.T) { testFullScan(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open) })
	t.Run("Bulk", func(t *testing.T) { testBulk(t, open) })
	t.Run("Embeddings", func(t *testing.T) { testEmbeddings(t, open) })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func openT(t *testing.T, open Open) memory.Store {
	s := open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func testFixture(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	cases, err := BM25Fixture()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, c := range cases {
		ns := "fixture/" + c.Name // one namespace per case: they must not see each other
		for _, n := range c.Notes {
			if _, err := s.Remember(ctx, ns, memory.Write{URI: n.URI, Text: n.Content}); err != nil {
				t.Fatalf("%s: remember %s: %v", c.Name, n.URI, err)
			}
		}
		for _, q := range c.Queries {
			hits, err := s.Recall(ctx, ns, memory.Query{Text: q.Query, TopK: q.TopK})
			if err != nil {
				t.Fatalf("%s: recall %q: %v", c.Name, q.Query, err)
			}
			if len(hits) != len(q.Hits) {
				t.Fatalf("%s %q: %d hits, OpenRath %d: %+v", c.Name, q.Query, len(hits), len(q.Hits), hits)
			}
			for i, want := range q.Hits {
				got := hits[i]
				if got.URI != want.URI || got.Score != want.Score || got.Snippet != want.Snippet {
					t.Errorf("%s %q rank %d: %s %x %q; OpenRath %s %s %q", c.Name, q.Query, i, got.URI, got.Score, got.Snippet, want.URI, want.ScoreHex, want.Snippet)
				}
				checked++
			}
		}
	}
	if checked != 25 {
		t.Fatalf("checked %d hits, the fixture records 25", checked)
	}
}

func testCRUD(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	const ns = "tenant/a"
	const uri = "memory://user/memories/preferences/theme"
	it, err := s.Remember(ctx, ns, memory.Write{URI: uri, Text: "Prefers a dark theme.", Metadata: map[string]string{"source": "test"}, VersionID: "v-1"})
	if err != nil {
		t.Fatal(err)
	}
	if it.CreatedAt.IsZero() || it.VersionID != "v-1" || it.Namespace != ns {
		t.Fatalf("remember returned %+v", it)
	}
	got, err := s.Read(ctx, ns, uri)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != "Prefers a dark theme." || got.Metadata["source"] != "test" || got.VersionID != "v-1" || !got.DeletedAt.IsZero() {
		t.Fatalf("read %+v", got)
	}
	if _, err := s.Read(ctx, "tenant/b", uri); !memory.IsKind(err, memory.KindNotFound) {
		t.Fatalf("read from another namespace: %v", err)
	}
	// Replace: created_at kept, version and text replaced, the index follows.
	it2, err := s.Remember(ctx, ns, memory.Write{URI: uri, Text: "Prefers a light theme.", VersionID: "v-2"})
	if err != nil {
		t.Fatal(err)
	}
	if !it2.CreatedAt.Equal(got.CreatedAt) || it2.VersionID != "v-2" {
		t.Fatalf("replace: %+v (first created %v)", it2, got.CreatedAt)
	}
	hits, err := s.Recall(ctx, ns, memory.Query{Text: "dark", TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Score != 0 {
		t.Fatalf("recall of a replaced word: %+v", hits)
	}
	hits, err = s.Recall(ctx, ns, memory.Query{Text: "light theme", TopK: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Score <= 0 || hits[0].VersionID != "v-2" || hits[0].URI != uri {
		t.Fatalf("recall after replace: %+v", hits)
	}
	if _, err := s.Remember(ctx, ns, memory.Write{URI: "memory://agent/conventions/go", Text: "Answer in Go."}); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, ns, memory.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].URI != "memory://agent/conventions/go" || all[1].URI != uri {
		t.Fatalf("list: %+v", all)
	}
	user, err := s.List(ctx, ns, memory.ListOptions{Scope: "memory://user"})
	if err != nil {
		t.Fatal(err)
	}
	if len(user) != 1 || user[0].URI != uri {
		t.Fatalf("list user scope: %+v", user)
	}
	hits, err = s.Recall(ctx, ns, memory.Query{Text: "go theme", TopK: 5, Scope: "memory://agent/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].URI != "memory://agent/conventions/go" {
		t.Fatalf("recall agent scope: %+v", hits)
	}
	if empty, err := s.Recall(ctx, "nobody", memory.Query{Text: "go"}); err != nil || len(empty) != 0 {
		t.Fatalf("recall in an empty namespace: %+v, %v", empty, err)
	}
}

func testDelete(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	const ns = "del"
	docs := []memory.Doc{
		{URI: "memory://user/a", Text: "alpha beta"},
		{URI: "memory://user/b", Text: "beta gamma gamma"},
		{URI: "memory://user/c", Text: "gamma delta"},
	}
	for _, d := range docs {
		if _, err := s.Remember(ctx, ns, memory.Write{URI: d.URI, Text: d.Text, VersionID: "v-w"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, ns, "memory://user/b", "v-del"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, ns, "memory://user/b"); !memory.IsKind(err, memory.KindNotFound) {
		t.Fatalf("read deleted: %v", err)
	}
	if err := s.Delete(ctx, ns, "memory://user/b", "v-del"); !memory.IsKind(err, memory.KindNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	live, err := s.List(ctx, ns, memory.ListOptions{})
	if err != nil || len(live) != 2 {
		t.Fatalf("list after delete: %+v, %v", live, err)
	}
	withDel, err := s.List(ctx, ns, memory.ListOptions{IncludeDeleted: true})
	if err != nil || len(withDel) != 3 {
		t.Fatalf("list with tombstones: %+v, %v", withDel, err)
	}
	tomb := withDel[1]
	if tomb.URI != "memory://user/b" || tomb.DeletedAt.IsZero() || tomb.DeletedVersionID != "v-del" || tomb.VersionID != "v-w" {
		t.Fatalf("tombstone: %+v", tomb)
	}
	// Statistics follow the delete: scores equal a scan of what is left.
	want := memory.RankDocs([]memory.Doc{docs[0], docs[2]}, "gamma beta", 5)
	got, err := s.Recall(ctx, ns, memory.Query{Text: "gamma beta", TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	sameHits(t, "after delete", got, want)
	// Remembering again revives the URI.
	if _, err := s.Remember(ctx, ns, memory.Write{URI: "memory://user/b", Text: "beta again"}); err != nil {
		t.Fatal(err)
	}
	if it, err := s.Read(ctx, ns, "memory://user/b"); err != nil || it.Text != "beta again" || !it.DeletedAt.IsZero() {
		t.Fatalf("revived: %+v, %v", it, err)
	}
}

func testBadInput(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	for _, uri := range []string{"", "memory://user", "memory://user/./x", "memory://user/../x", "memory://tenant/x", "viking://user/x"} {
		if _, err := s.Remember(ctx, "", memory.Write{URI: uri, Text: "x"}); !memory.IsKind(err, memory.KindInvalidURI) {
			t.Errorf("remember %q: %v", uri, err)
		}
		if _, err := s.Read(ctx, "", uri); !memory.IsKind(err, memory.KindInvalidURI) {
			t.Errorf("read %q: %v", uri, err)
		}
		if err := s.Delete(ctx, "", uri, ""); !memory.IsKind(err, memory.KindInvalidURI) {
			t.Errorf("delete %q: %v", uri, err)
		}
	}
	_, err := s.Remember(ctx, "", memory.Write{URI: "memory://user/huge", Text: strings.Repeat("a ", memory.MaxTextBytes)})
	if !memory.IsKind(err, memory.KindTooLarge) || !strings.Contains(err.Error(), "MaxTextBytes") {
		t.Errorf("huge item: %v", err)
	}
	if _, err := s.Recall(ctx, "", memory.Query{Text: "x", TopK: memory.MaxTopK + 1}); !memory.IsKind(err, memory.KindInvalidArgument) {
		t.Errorf("top_k too large: %v", err)
	}
	if _, err := s.Recall(ctx, "", memory.Query{Text: "x", Scope: "memory://nowhere"}); !memory.IsKind(err, memory.KindInvalidURI) {
		t.Errorf("bad scope: %v", err)
	}
	if _, err := s.List(ctx, "", memory.ListOptions{Scope: "file:///"}); !memory.IsKind(err, memory.KindInvalidURI) {
		t.Errorf("bad list scope: %v", err)
	}
}

var vocab = strings.Fields("go test commit dark theme night code python review lint tabs spaces editor vim sql postgres table index query fast slow memory agent user tool")

func randText(r *rand.Rand) string {
	n := 1 + r.IntN(12)
	w := make([]string, n)
	for i := range w {
		w[i] = vocab[r.IntN(len(vocab))]
		if r.IntN(5) == 0 {
			w[i] = strings.ToUpper(w[i]) + "-x"
		}
	}
	return strings.Join(w, " ")
}

func testFullScan(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	r := rand.New(rand.NewPCG(7, 9))
	const ns = "scan"
	live := map[string]string{}
	scopes := []string{"user", "agent", "session", "resources"}
	for i := range 300 {
		uri := fmt.Sprintf("memory://%s/d%d/n%03d", scopes[r.IntN(4)], r.IntN(3), r.IntN(150))
		switch {
		case i > 50 && r.IntN(8) == 0 && len(live) > 0:
			for u := range live {
				if err := s.Delete(ctx, ns, u, ""); err != nil {
					t.Fatal(err)
				}
				delete(live, u)
				break
			}
		default:
			text := randText(r)
			if _, err := s.Remember(ctx, ns, memory.Write{URI: uri, Text: text}); err != nil {
				t.Fatal(err)
			}
			live[uri] = text
		}
	}
	for qi := range 40 {
		query := randText(r)
		scope := ""
		switch qi % 3 {
		case 1:
			scope = "memory://" + scopes[r.IntN(4)]
		case 2:
			scope = fmt.Sprintf("memory://%s/d%d/", scopes[r.IntN(4)], r.IntN(3))
		}
		prefix, _ := memory.ParseScope(scope)
		var docs []memory.Doc
		for u, text := range live {
			if strings.HasPrefix(u, prefix) {
				docs = append(docs, memory.Doc{URI: u, Text: text})
			}
		}
		k := 1 + r.IntN(30)
		want := memory.RankDocs(docs, query, k)
		got, err := s.Recall(ctx, ns, memory.Query{Text: query, TopK: k, Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		sameHits(t, fmt.Sprintf("query %q scope %q k %d", query, scope, k), got, want)
	}
}

func sameHits(t *testing.T, what string, got, want []memory.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, full scan %d\n got %+v\nwant %+v", what, len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].URI != want[i].URI || got[i].Score != want[i].Score || got[i].Snippet != want[i].Snippet {
			t.Fatalf("%s: rank %d: %s %v, full scan %s %v", what, i, got[i].URI, got[i].Score, want[i].URI, want[i].Score)
		}
	}
}

func testConcurrent(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	const ns = "conc"
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				// Every goroutine writes the same 10 URIs: replaces race.
				uri := fmt.Sprintf("memory://user/c/%02d", i%10)
				if _, err := s.Remember(ctx, ns, memory.Write{URI: uri, Text: fmt.Sprintf("writer %d note %d go", g, i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	items, err := s.List(ctx, ns, memory.ListOptions{})
	if err != nil || len(items) != 10 {
		t.Fatalf("list: %d items, %v", len(items), err)
	}
	docs := make([]memory.Doc, 0, len(items))
	for _, it := range items {
		docs = append(docs, memory.Doc{URI: it.URI, Text: it.Text})
	}
	got, err := s.Recall(ctx, ns, memory.Query{Text: "writer 3 go", TopK: 10})
	if err != nil {
		t.Fatal(err)
	}
	sameHits(t, "after concurrent writes", got, memory.RankDocs(docs, "writer 3 go", 10))
}

func testClosed(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := open(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Recall(ctx, "", memory.Query{Text: "x"}); !memory.IsKind(err, memory.KindStoreClosed) {
		t.Fatalf("recall on a closed store: %v", err)
	}
}

// testBulk: a bulk load (when the backend has one) indexes like single
// writes, a repeated URI keeps its last text, and bad items refuse the batch.
func testBulk(t *testing.T, open Open) {
	ctx := ctxT(t)
	s := openT(t, open)
	bulk, ok := s.(Bulk)
	if !ok {
		t.Log("backend has no bulk load")
		return
	}
	ws := Corpus(300)
	ws = append(ws, memory.Write{URI: ws[0].URI, Text: "replaced w1 w2"})
	if err := bulk.RememberMany(ctx, "bulk", ws); err != nil {
		t.Fatal(err)
	}
	docs := make([]memory.Doc, 0, 300)
	for _, w := range ws[1:300] {
		docs = append(docs, memory.Doc{URI: w.URI, Text: w.Text})
	}
	docs = append(docs, memory.Doc{URI: ws[0].URI, Text: "replaced w1 w2"})
	for _, q := range Queries(20) {
		got, err := s.Recall(ctx, "bulk", memory.Query{Text: q, TopK: 10})
		if err != nil {
			t.Fatal(err)
		}
		sameHits(t, "bulk "+q, got, memory.RankDocs(docs, q, 10))
	}
	// A larger Zipf corpus, where recall skips the lists of common terms:
	// the top k must still equal the full scan's, scores bit for bit.
	big := Corpus(3000)
	if err := bulk.RememberMany(ctx, "bulk-3k", big); err != nil {
		t.Fatal(err)
	}
	bigDocs := make([]memory.Doc, len(big))
	for i, w := range big {
		bigDocs[i] = memory.Doc{URI: w.URI, Text: w.Text}
	}
	for i, q := range Queries(40) {
		k := []int{1, 4, 8, 50}[i%4]
		got, err := s.Recall(ctx, "bulk-3k", memory.Query{Text: q, TopK: k})
		if err != nil {
			t.Fatal(err)
		}
		sameHits(t, "bulk-3k "+q, got, memory.RankDocs(bigDocs, q, k))
	}
	err := bulk.RememberMany(ctx, "bulk", []memory.Write{{URI: "memory://user/ok", Text: "x"}, {URI: "memory://user/../bad", Text: "y"}})
	if !memory.IsKind(err, memory.KindInvalidURI) {
		t.Fatalf("bad item in a batch: %v", err)
	}
	if _, err := s.Read(ctx, "bulk", "memory://user/ok"); !memory.IsKind(err, memory.KindNotFound) {
		t.Fatalf("a refused batch wrote: %v", err)
	}
}
