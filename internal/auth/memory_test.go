package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/agent"
	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/memory"
	"github.com/rath-run/rath/pkg/memory/pgmem"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// confinedPool connects as tenant the way tenant pools do (rath.tenant and
// role rath_coordinator as startup parameters), for raw SQL attacks.
func confinedPool(t *testing.T, dbURL, tenant string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testdb.WithParams(t, dbURL, "rath.tenant", tenant, "role", auth.TenantRole))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func wantSQLState(t *testing.T, what string, err error, code string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code {
		t.Errorf("%s: err = %v, want SQLSTATE %s", what, err, code)
	}
}

// TestMemoryRowLevelSecurityConfinesTenants attacks tenant acme's memories
// from tenant umbrella: through umbrella's confined memory store (Read,
// List, Recall, Remember over acme's item or beside it, Delete) and with raw
// SQL on a confined connection (every memory table reads 0 rows; INSERT is
// refused with 42501; UPDATE and DELETE touch 0 rows). acme's item is
// unchanged afterwards. A worker's system write of an umbrella step claims
// its new namespace for umbrella.
func TestMemoryRowLevelSecurityConfinesTenants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, dbURL := migrated(t)
	pools, err := auth.NewTenantPools(dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pools.Close() })
	ma, err := pools.Memory(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	mb, err := pools.Memory(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := pools.Memory(ctx, "acme"); err != nil || again != ma {
		t.Fatalf("second Memory(acme) = %v, %v; want the same store", again, err)
	}

	const ns, uri, secret = "acme-notes", "memory://user/launch", "the launch code is swordfish"
	if _, err := ma.Remember(ctx, ns, memory.Write{URI: uri, Text: secret}); err != nil {
		t.Fatalf("acme remembering in its own namespace: %v", err)
	}
	if hits, err := ma.Recall(ctx, ns, memory.Query{Text: "launch code"}); err != nil || len(hits) != 1 {
		t.Fatalf("acme recalling its own memory: %v hits, %v; want 1", len(hits), err)
	}

	// Umbrella, through its confined store: nothing to read, nothing to write.
	if _, err := mb.Read(ctx, ns, uri); !memory.IsKind(err, memory.KindNotFound) {
		t.Errorf("umbrella Read(acme's item) = %v, want not_found", err)
	}
	if items, err := mb.List(ctx, ns, memory.ListOptions{IncludeDeleted: true}); err != nil || len(items) != 0 {
		t.Errorf("umbrella List(acme's namespace) = %d items, %v; want 0", len(items), err)
	}
	if hits, err := mb.Recall(ctx, ns, memory.Query{Text: "launch code swordfish"}); err != nil || len(hits) != 0 {
		t.Errorf("umbrella Recall(acme's namespace) = %d hits, %v; want 0", len(hits), err)
	}
	if hits, err := mb.Recall(ctx, ns, memory.Query{Text: "launch", Scope: "memory://user"}); err != nil || len(hits) != 0 {
		t.Errorf("umbrella scoped Recall(acme's namespace) = %d hits, %v; want 0", len(hits), err)
	}
	for _, w := range []memory.Write{{URI: uri, Text: "overwritten by umbrella"}, {URI: "memory://user/planted", Text: "planted by umbrella"}} {
		if _, err := mb.Remember(ctx, ns, w); err == nil || !strings.Contains(err.Error(), "42501") {
			t.Errorf("umbrella Remember(%s in acme's namespace) = %v, want refused with 42501", w.URI, err)
		}
	}
	if err := mb.Delete(ctx, ns, uri, ""); !memory.IsKind(err, memory.KindNotFound) {
		t.Errorf("umbrella Delete(acme's item) = %v, want not_found", err)
	}

	// Umbrella, raw SQL on a confined connection.
	raw := confinedPool(t, dbURL, "umbrella")
	for _, table := range []string{"memory_namespaces", "memory_items", "memory_postings", "memory_stats", "memory_terms", "memory_log", "memory_vectors"} {
		var n int
		if err := raw.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		if n != 0 {
			t.Errorf("umbrella's connection reads %d rows of acme's in %s, want 0", n, table)
		}
	}
	_, err = raw.Exec(ctx, `INSERT INTO memory_items (namespace, uri, text, dl, created_at, updated_at) VALUES ($1, 'memory://user/raw', 'raw', 1, 0, 0)`, ns)
	wantSQLState(t, "raw INSERT into acme's namespace", err, "42501")
	_, err = raw.Exec(ctx, `INSERT INTO memory_namespaces (namespace, tenant) VALUES ('stolen', 'acme')`)
	wantSQLState(t, "raw INSERT of a namespace owned by acme", err, "42501")
	_, err = raw.Exec(ctx, `INSERT INTO memory_stats (namespace, docs, total_dl) VALUES ($1, 1, 1)`, ns)
	wantSQLState(t, "raw INSERT of acme's namespace statistics", err, "42501")
	for _, st := range []string{
		`UPDATE memory_items SET text = 'x' WHERE namespace = $1`,
		`UPDATE memory_namespaces SET tenant = 'umbrella' WHERE namespace = $1`,
		`DELETE FROM memory_items WHERE namespace = $1`,
		`DELETE FROM memory_namespaces WHERE namespace = $1`,
	} {
		tag, err := raw.Exec(ctx, st, ns)
		if err != nil {
			t.Errorf("%s: %v", st, err)
		} else if tag.RowsAffected() != 0 {
			t.Errorf("%s: %d rows affected, want 0", st, tag.RowsAffected())
		}
	}

	// acme's memory is untouched.
	it, err := ma.Read(ctx, ns, uri)
	if err != nil || it.Text != secret {
		t.Fatalf("acme's item after the attack = %q, %v; want %q", it.Text, err, secret)
	}
	if items, err := ma.List(ctx, ns, memory.ListOptions{IncludeDeleted: true}); err != nil || len(items) != 1 {
		t.Errorf("acme's namespace after the attack holds %d items, %v; want 1", len(items), err)
	}

	// Umbrella works in a namespace of its own.
	if _, err := mb.Remember(ctx, "umbrella-notes", memory.Write{URI: "memory://user/x", Text: "umbrella's own note"}); err != nil {
		t.Fatalf("umbrella remembering in its own namespace: %v", err)
	}
	if hits, err := mb.Recall(ctx, "umbrella-notes", memory.Query{Text: "note"}); err != nil || len(hits) != 1 {
		t.Errorf("umbrella recalling its own note = %d hits, %v; want 1", len(hits), err)
	}
	if _, err := ma.Read(ctx, "umbrella-notes", "memory://user/x"); !memory.IsKind(err, memory.KindNotFound) {
		t.Errorf("acme Read(umbrella's item) = %v, want not_found", err)
	}

	// A worker (system connection) commits memory for an umbrella step into
	// a new namespace: the namespace goes to the version's tenant.
	gb, _, err := pools.For(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	v, err := session.New(ctx, gb, session.User("umbrella's run input"))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := pgmem.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Close() })
	if _, err := worker.Remember(ctx, "umbrella-agent", memory.Write{URI: "memory://session/x/transcript", Text: "user: umbrella's run input", VersionID: v.ID().String()}); err != nil {
		t.Fatal(err)
	}
	var owner string
	if err := sys.Pool().QueryRow(ctx, `SELECT tenant FROM memory_namespaces WHERE namespace = 'umbrella-agent'`).Scan(&owner); err != nil || owner != "umbrella" {
		t.Fatalf("namespace a worker wrote for umbrella's step belongs to %q (%v), want umbrella", owner, err)
	}
	if _, err := mb.Read(ctx, "umbrella-agent", "memory://session/x/transcript"); err != nil {
		t.Errorf("umbrella reading the memory its step wrote: %v", err)
	}
	if items, err := ma.List(ctx, "umbrella-agent", memory.ListOptions{}); err != nil || len(items) != 0 {
		t.Errorf("acme lists %d items of umbrella's step memory (%v), want 0", len(items), err)
	}
	// Existing and system-written namespaces without a version belong to default.
	if _, err := worker.Remember(ctx, "ops", memory.Write{URI: "memory://user/x", Text: "operator's note"}); err != nil {
		t.Fatal(err)
	}
	if err := sys.Pool().QueryRow(ctx, `SELECT tenant FROM memory_namespaces WHERE namespace = 'ops'`).Scan(&owner); err != nil || owner != auth.DefaultTenant {
		t.Errorf("namespace written by the system without a version belongs to %q (%v), want default", owner, err)
	}
}

// stepWithMemory runs one scripted agent step on the session version id (opened on
// the system graph store, as a worker does) whose memory binds ns through
// router, and returns the step's memory_recall payload and the text of
// every chunk it wrote, with the memory.commit event's error kind.
func stepWithMemory(t *testing.T, sys *pgstore.Store, router memory.Store, id session.ID, ns string) (recall string, all string, commitErr string) {
	t.Helper()
	ctx := context.Background()
	s, err := session.Open(ctx, sys, id)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{
		Spec:     agent.Spec{Name: "rememberer", Model: "scripted", Memory: agent.MemorySpec{Store: "local", Namespace: ns, Commit: true}},
		Provider: &llm.Scripted{Replies: []llm.ScriptReply{{Content: "noted"}}},
		Memory:   router,
	}
	out, err := a.Step(ctx, s, agent.Meta{OnEvent: func(e agent.Event) {
		if e.Type == "memory.commit" && !e.OK {
			commitErr = e.ErrorKind
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := out.Chunks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range chunks {
		if c.Kind() == session.KindMemoryRecall {
			recall = string(c.Payload())
		}
		b.Write(c.Payload())
	}
	return recall, b.String(), commitErr
}

// TestMemoryRouterConfinesSteps attacks from a worker's side: the workers'
// memory store (auth.MemoryRouter, shared by every tenant) runs an agent
// step of tenant umbrella whose spec names tenant acme's namespace. The
// step recalls nothing of acme's (its memory_recall chunk and transcript
// carry none of acme's text) and its memory commit into acme's namespace
// is refused; acme's namespace still holds its one item. Calls acting for
// umbrella's version directly (Read, List, Recall, Remember) get not_found,
// nothing, or 42501. The same step on acme's session recalls the item, and
// a version that does not exist is refused rather than served as system.
func TestMemoryRouterConfinesSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sys, dbURL := migrated(t)
	pools, err := auth.NewTenantPools(dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	system, err := pgmem.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	router := &auth.MemoryRouter{System: system, Pools: pools}
	t.Cleanup(func() { _ = router.Close() })

	ga, _, err := pools.For(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	gb, _, err := pools.For(ctx, "umbrella")
	if err != nil {
		t.Fatal(err)
	}
	va, err := session.New(ctx, ga, session.User("what is the launch code?"))
	if err != nil {
		t.Fatal(err)
	}
	vb, err := session.New(ctx, gb, session.User("what is the launch code?"))
	if err != nil {
		t.Fatal(err)
	}
	const ns, uri, secret = "acme-notes", "memory://user/launch", "the launch code is swordfish"
	if _, err := router.Remember(ctx, ns, memory.Write{URI: uri, Text: secret, VersionID: va.ID().String()}); err != nil {
		t.Fatalf("acme's version remembering: %v", err)
	}

	// Umbrella's step, naming acme's namespace.
	recall, all, commitErr := stepWithMemory(t, sys, router, vb.ID(), ns)
	if recall == "" {
		t.Fatal("umbrella's step recorded no memory_recall chunk")
	}
	if strings.Contains(all, "swordfish") || strings.Contains(all, uri) {
		t.Errorf("umbrella's step recalled acme's memory: %s", all)
	}
	if commitErr == "" {
		t.Error("umbrella's step committed its transcript into acme's namespace")
	}
	bctx := memory.WithVersion(ctx, vb.ID().String())
	if _, err := router.Read(bctx, ns, uri); !memory.IsKind(err, memory.KindNotFound) {
		t.Errorf("Read for umbrella's version = %v, want not_found", err)
	}
	if items, err := router.List(bctx, ns, memory.ListOptions{IncludeDeleted: true}); err != nil || len(items) != 0 {
		t.Errorf("List for umbrella's version = %d items, %v; want 0", len(items), err)
	}
	if hits, err := router.Recall(bctx, ns, memory.Query{Text: "launch code swordfish"}); err != nil || len(hits) != 0 {
		t.Errorf("Recall for umbrella's version = %d hits, %v; want 0", len(hits), err)
	}
	if _, err := router.Remember(bctx, ns, memory.Write{URI: uri, Text: "overwritten", VersionID: vb.ID().String()}); err == nil || !strings.Contains(err.Error(), "42501") {
		t.Errorf("Remember over acme's item for umbrella's version = %v, want 42501", err)
	}
	if _, err := router.Read(memory.WithVersion(ctx, "00000000-0000-4000-8000-000000000000"), ns, uri); !memory.IsKind(err, memory.KindNotFound) {
		t.Errorf("Read for a version that does not exist = %v, want not_found", err)
	}
	items, err := router.List(memory.WithVersion(ctx, va.ID().String()), ns, memory.ListOptions{IncludeDeleted: true})
	if err != nil || len(items) != 1 || items[0].Text != secret {
		t.Fatalf("acme's namespace after umbrella's step: %+v, %v; want its one item unchanged", items, err)
	}

	// Acme's step recalls its own memory, and commits into its namespace.
	recall, _, commitErr = stepWithMemory(t, sys, router, va.ID(), ns)
	if !strings.Contains(recall, uri) {
		t.Errorf("acme's step did not recall its own memory: %s", recall)
	}
	if commitErr != "" {
		t.Errorf("acme's step memory commit failed: %s", commitErr)
	}
}
