package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
	"github.com/rath-run/rath/pkg/workspace"
)

// sessStack is a real coordinator for the examples: the dev stack (SQLite
// in a temporary directory, embedded NATS, no workers: sessions need none)
// with its HTTP handler served by httptest.
type sessStack struct {
	dev *app.Dev
	srv *httptest.Server
	dir string
}

// sessStart starts a coordinator and returns a client of it.
func sessStart() (*client.Client, *sessStack) {
	dir, err := os.MkdirTemp("", "rath-example-")
	if err != nil {
		panic(err)
	}
	d, err := app.StartDev(context.Background(), app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", Workers: -1,
		StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		panic(err)
	}
	s := &sessStack{dev: d, srv: httptest.NewServer(d.Coordinator.Handler()), dir: dir}
	cl, err := client.New(s.srv.URL, "")
	if err != nil {
		panic(err)
	}
	return cl, s
}

func (s *sessStack) stop() {
	s.srv.Close()
	s.dev.Close()
	_ = os.RemoveAll(s.dir)
}

// sessSnapshot records files as a version's workspace, as a worker does
// after a step: it snapshots them into the coordinator's workspace store
// and commits version id placed on the snapshot.
func (s *sessStack) sessSnapshot(ctx context.Context, id session.ID, files map[string]string) session.ID {
	src, err := os.MkdirTemp(s.dir, "ws-")
	if err != nil {
		panic(err)
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte(c), 0o644); err != nil {
			panic(err)
		}
	}
	b := s.dev.Backend
	snaps, err := workspace.New(workspace.JetStream(b.Bus.JetStream(), b.Bus.Workspaces()), workspace.Config{})
	if err != nil {
		panic(err)
	}
	res, err := snaps.Snapshot(ctx, src, "")
	if err != nil {
		panic(err)
	}
	v, err := session.Open(ctx, b.Store, id)
	if err != nil {
		panic(err)
	}
	placed, err := v.To(ctx, session.Placement{Backend: "local", Snapshot: res.ID})
	if err != nil {
		panic(err)
	}
	return placed.ID()
}

// Sessions are created, extended, forked and merged through the API; each
// operation commits a new immutable version and returns it.
func ExampleClient_NewSession() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	root, err := cl.NewSession(ctx, api.SessionRequest{System: "be brief", User: "plan a trip"})
	if err != nil {
		panic(err)
	}
	a, err := cl.Append(ctx, root.ID, api.SessionRequest{Assistant: "Kyoto"})
	if err != nil {
		panic(err)
	}
	fork, err := cl.Fork(ctx, root.ID)
	if err != nil {
		panic(err)
	}
	b, err := cl.Append(ctx, fork.ID, api.SessionRequest{Assistant: "Osaka"})
	if err != nil {
		panic(err)
	}
	merged, err := cl.Merge(ctx, a.ID, b.ID)
	if err != nil {
		panic(err)
	}
	for _, v := range []*api.Version{root, a, fork, b, merged} {
		fmt.Printf("%s len=%d own=%d parents=%d\n", v.Op, v.Len, len(v.Chunks), len(v.Parents))
	}
	tr, err := cl.Transcript(ctx, merged.ID)
	if err != nil {
		panic(err)
	}
	for _, c := range tr.Chunks {
		fmt.Printf("%s: %s\n", c.Kind(), c.Text())
	}
	// Output:
	// create len=2 own=2 parents=0
	// append len=3 own=1 parents=1
	// fork len=2 own=0 parents=1
	// append len=3 own=1 parents=1
	// merge len=4 own=1 parents=2
	// system: be brief
	// user: plan a trip
	// assistant: Kyoto
	// assistant: Osaka
}

// A version the caller's tenant does not hold is ErrNotFound (and
// session.ErrNotFound).
func ExampleClient_GetSession() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	v, err := cl.NewSession(ctx, api.SessionRequest{User: "hi"})
	if err != nil {
		panic(err)
	}
	got, err := cl.GetSession(ctx, v.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.ID == v.ID, got.Op, got.Chunks[0].Text())
	_, err = cl.GetSession(ctx, session.NewID())
	fmt.Println(errors.Is(err, client.ErrNotFound), errors.Is(err, session.ErrNotFound))
	// Output:
	// true create hi
	// true true
}

// Ancestors walk a version's lineage, nearest first; ListSessions pages
// through versions in commit order.
func ExampleClient_Ancestors() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	v, err := cl.NewSession(ctx, api.SessionRequest{User: "one"})
	if err != nil {
		panic(err)
	}
	root := v.ID
	for _, text := range []string{"two", "three"} {
		if v, err = cl.Append(ctx, v.ID, api.SessionRequest{User: text}); err != nil {
			panic(err)
		}
	}
	if _, err := cl.Detach(ctx, v.ID); err != nil {
		panic(err)
	}
	anc, err := cl.Ancestors(ctx, v.ID, 0)
	if err != nil {
		panic(err)
	}
	for _, r := range anc.Versions {
		fmt.Println(r.Depth, r.Op, r.Len, r.ID == root)
	}
	roots, err := cl.ListSessions(ctx, store.ListParams{RootsOnly: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("roots:", len(roots.Versions))
	// Output:
	// 1 append 2 false
	// 2 create 1 true
	// roots: 2
}

// Place records that a session's tools run on another sandbox.
func ExampleClient_Place() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	v, err := cl.NewSession(ctx, api.SessionRequest{User: "build it"})
	if err != nil {
		panic(err)
	}
	placed, err := cl.Place(ctx, v.ID, api.PlaceRequest{Backend: "docker", Spec: session.Spec{Image: "rath-sandbox:busybox"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(placed.Op, placed.Placement.Backend, placed.Placement.Spec.Image, placed.Len)
	// Output:
	// place docker rath-sandbox:busybox 1
}

// Export writes a session as Rath session JSONL or as an OpenRath
// transcript; Import reads either (detecting the format) and stores it,
// here in another coordinator.
func ExampleClient_Export() {
	cl, s := sessStart()
	defer s.stop()
	other, s2 := sessStart()
	defer s2.stop()
	ctx := context.Background()

	v, err := cl.NewSession(ctx, api.SessionRequest{System: "s", User: "u"})
	if err != nil {
		panic(err)
	}
	if v, err = cl.Append(ctx, v.ID, api.SessionRequest{Assistant: "a"}); err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := cl.Export(ctx, v.ID, &buf, client.ExportOpenRath); err != nil {
		panic(err)
	}
	imp, err := other.Import(ctx, &buf, "") // detected: an OpenRath transcript
	if err != nil {
		panic(err)
	}
	fmt.Println(len(imp.Sessions), imp.Head.Op, imp.Head.Len)
	tr, err := other.Transcript(ctx, imp.Head.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(tr.Chunks[2].Text())
	// Output:
	// 1 import 3
	// a
}

// SessionGraph returns the lineage graph as nodes and edges; Blame says
// which version made each chunk of a transcript.
func ExampleClient_Blame() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	root, err := cl.NewSession(ctx, api.SessionRequest{User: "question"})
	if err != nil {
		panic(err)
	}
	fork, err := cl.Fork(ctx, root.ID)
	if err != nil {
		panic(err)
	}
	answer, err := cl.Append(ctx, fork.ID, api.SessionRequest{Assistant: "answer"})
	if err != nil {
		panic(err)
	}
	g, err := cl.SessionGraph(ctx, root.ID, client.GraphOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("nodes:", len(g.Nodes), "edges:", len(g.Edges))
	b, err := cl.Blame(ctx, answer.ID)
	if err != nil {
		panic(err)
	}
	for _, e := range b.Chunks {
		fmt.Println(e.Ord, e.Kind, e.Op, e.Version == answer.ID)
	}
	// Output:
	// nodes: 3 edges: 2
	// 0 user create false
	// 1 assistant append true
}

// Files lists a version's workspace, ReadFile returns one file's content
// and Diff compares two versions' workspaces.
func ExampleClient_Files() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	v, err := cl.NewSession(ctx, api.SessionRequest{User: "write a README"})
	if err != nil {
		panic(err)
	}
	before := s.sessSnapshot(ctx, v.ID, map[string]string{"main.go": "package main\n"})
	after := s.sessSnapshot(ctx, before, map[string]string{"main.go": "package main\n", "README.md": "# hello\n"})

	files, err := cl.Files(ctx, after)
	if err != nil {
		panic(err)
	}
	for _, e := range files.Entries {
		fmt.Println(e.Type, e.Mode, e.Size, e.Path)
	}
	f, err := cl.ReadFile(ctx, after, "README.md")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %q\n", f.Mode, f.Content)
	d, err := cl.Diff(ctx, before, after)
	if err != nil {
		panic(err)
	}
	for _, c := range d.Changes {
		fmt.Println(c.Kind, c.Path)
	}
	_, err = cl.ReadFile(ctx, after, "missing.txt")
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// file 0644 8 README.md
	// file 0644 13 main.go
	// 0644 "# hello\n"
	// added README.md
	// true
}

// Graph is a session.Graph over the API: sessions opened on it fork,
// append and merge in the calling program, and the coordinator verifies
// and stores every version.
func ExampleClient_Graph() {
	cl, s := sessStart()
	defer s.stop()
	ctx := context.Background()

	g := cl.Graph()
	root, err := session.New(ctx, g, session.User("hello"))
	if err != nil {
		panic(err)
	}
	next, err := root.Append(ctx, session.Assistant("hi there"))
	if err != nil {
		panic(err)
	}
	v, err := cl.GetSession(ctx, next.ID())
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Op, v.Len, v.Hash == next.Hash())
	// Output:
	// append 2 true
}
