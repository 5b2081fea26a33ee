package coordinator_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/auth"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// TestTenantIsolationThroughTheClient is the attacker's side of the
// session, lineage and workspace endpoints as pkg/client reaches them: a
// token of tenant umbrella reads and writes nothing of tenant acme's
// through any typed method or through client.Graph (each answers
// not-found, naming nothing of acme's), and a read-scoped token of acme
// cannot write through them.
func TestTenantIsolationThroughTheClient(t *testing.T) {
	t.Parallel()
	s := newAuthStack(t, "postgres", -1)
	ctx := context.Background()
	newClient := func(tok string) *client.Client {
		cl, err := client.New(s.url, tok)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	acme := newClient(s.mint(t, auth.ScopeSubmit, "acme").Secret)
	reader := newClient(s.mint(t, auth.ScopeRead, "acme").Secret)
	eve := newClient(s.mint(t, auth.ScopeSubmit, "umbrella").Secret)

	secret, err := acme.NewSession(ctx, api.SessionRequest{System: "acme's secret prompt", User: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := eve.NewSession(ctx, api.SessionRequest{User: "umbrella's own"})
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, client.ErrNotFound) || !errors.Is(err, session.ErrNotFound) {
			t.Errorf("umbrella %s of acme's version: %v, want not found", what, err)
		} else if strings.Contains(err.Error(), "secret prompt") {
			t.Errorf("umbrella %s: the error shows acme's content: %v", what, err)
		}
	}
	id := secret.ID
	_, err = eve.GetSession(ctx, id)
	notFound("GetSession", err)
	_, err = eve.Transcript(ctx, id)
	notFound("Transcript", err)
	_, err = eve.Ancestors(ctx, id, 0)
	notFound("Ancestors", err)
	_, err = eve.Descendants(ctx, id, 0)
	notFound("Descendants", err)
	_, err = eve.Blame(ctx, id)
	notFound("Blame", err)
	_, err = eve.SessionGraph(ctx, id, client.GraphOptions{})
	notFound("SessionGraph", err)
	_, err = eve.SessionGraph(ctx, id, client.GraphOptions{Around: true})
	notFound("SessionGraph around", err)
	notFound("WriteSessionGraph", eve.WriteSessionGraph(ctx, id, client.GraphOptions{}, lineage.FormatSVG, new(bytes.Buffer)))
	notFound("Export", eve.Export(ctx, id, new(bytes.Buffer), client.ExportRath))
	notFound("Export openrath", eve.Export(ctx, id, new(bytes.Buffer), client.ExportOpenRath))
	_, err = eve.Files(ctx, id)
	notFound("Files", err)
	_, err = eve.ReadFile(ctx, id, "README.md")
	notFound("ReadFile", err)
	_, err = eve.Diff(ctx, own.ID, id)
	notFound("Diff", err)
	_, err = eve.Fork(ctx, id)
	notFound("Fork", err)
	_, err = eve.Detach(ctx, id)
	notFound("Detach", err)
	_, err = eve.Append(ctx, id, api.SessionRequest{User: "injected"})
	notFound("Append", err)
	_, err = eve.Place(ctx, id, api.PlaceRequest{Backend: "local"})
	notFound("Place", err)
	_, err = eve.Merge(ctx, own.ID, id)
	notFound("Merge into its own", err)
	_, err = eve.Merge(ctx, id, own.ID)
	notFound("Merge", err)

	// client.Graph, and pkg/lineage over it (rathctl diff --server).
	eg := eve.Graph()
	_, err = eg.Get(ctx, id)
	notFound("Graph.Get", err)
	_, err = eg.Transcript(ctx, id)
	notFound("Graph.Transcript", err)
	_, _, err = eg.CommonBase(ctx, own.ID, id)
	notFound("Graph.CommonBase", err)
	_, err = lineage.Diff(ctx, eg, own.ID, id)
	notFound("lineage.Diff", err)
	// A version forking acme's, sealed with acme's hash (known to the
	// attacker somehow): its parent is not in umbrella's graph.
	sv, err := acme.Graph().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	fork := &session.Version{ID: session.NewID(), Parents: []session.ID{id}, Base: &id, Op: session.OpFork, CreatedAt: time.Now()}
	if err := session.Seal(fork, []*session.Version{sv}, sv); err != nil {
		t.Fatal(err)
	}
	_, err = eg.Put(ctx, fork)
	notFound("Graph.Put of a fork", err)
	page, err := eve.ListSessions(ctx, store.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range page.Versions {
		if v.ID == id {
			t.Errorf("umbrella's ListSessions shows acme's version %s", id)
		}
	}

	// A read token of acme reads acme's versions and writes nothing.
	if _, err := reader.Transcript(ctx, id); err != nil {
		t.Errorf("acme's read token: Transcript: %v", err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
			t.Errorf("read token %s: %v, want 403", what, err)
		}
	}
	_, err = reader.NewSession(ctx, api.SessionRequest{User: "x"})
	forbidden("NewSession", err)
	_, err = reader.Fork(ctx, id)
	forbidden("Fork", err)
	_, err = reader.Append(ctx, id, api.SessionRequest{User: "x"})
	forbidden("Append", err)
	_, err = reader.Place(ctx, id, api.PlaceRequest{Backend: "local"})
	forbidden("Place", err)
	_, err = reader.Graph().Put(ctx, fork)
	forbidden("Graph.Put", err)
	var jsonl bytes.Buffer
	if err := acme.Export(ctx, id, &jsonl, client.ExportRath); err != nil {
		t.Fatal(err)
	}
	_, err = reader.Import(ctx, &jsonl, "")
	forbidden("Import", err)

	// Nothing was written to acme's graph.
	if acmes, err := acme.ListSessions(ctx, store.ListParams{}); err != nil || len(acmes.Versions) != 1 {
		t.Errorf("acme's graph after the attacks: %v %+v, want its one version", err, acmes)
	}
}
