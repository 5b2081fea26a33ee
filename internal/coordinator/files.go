package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/workspace"
)

// Manifests reads workspace snapshot manifests (a *workspace.Snapshotter).
type Manifests interface {
	Manifest(ctx context.Context, id string) (*workspace.Manifest, error)
}

// errNoWorkspaces is returned by the workspace endpoints of a coordinator
// that has no workspace store.
var errNoWorkspaces = errors.New("coordinator: no workspace store configured")

// defaultManifests reads manifests from the bus's object store when the bus
// has one (a *bus.Bus does).
func defaultManifests(b Bus) (Manifests, error) {
	ws, ok := b.(interface {
		JetStream() jetstream.JetStream
		Workspaces() jetstream.ObjectStore
	})
	if !ok || ws.Workspaces() == nil {
		return nil, nil
	}
	return workspace.New(workspace.JetStream(ws.JetStream(), ws.Workspaces()), workspace.Config{})
}

// fileEntries converts manifest entries to the API's (the same JSON).
func fileEntries(es []workspace.Entry) []api.FileEntry {
	out := make([]api.FileEntry, len(es))
	for i, e := range es {
		out[i] = fileEntry(e)
	}
	return out
}

func fileEntry(e workspace.Entry) api.FileEntry {
	return api.FileEntry{Path: e.Path, Type: api.FileType(e.Type), Mode: api.FileMode(e.Mode), Size: e.Size, SHA256: e.SHA256, Target: e.Target}
}

func fileChanges(cs []workspace.Change) []api.FileChange {
	out := make([]api.FileChange, len(cs))
	for i, c := range cs {
		out[i] = api.FileChange{Path: c.Path, Kind: api.ChangeKind(c.Kind)}
		if c.Before != nil {
			e := fileEntry(*c.Before)
			out[i].Before = &e
		}
		if c.After != nil {
			e := fileEntry(*c.After)
			out[i].After = &e
		}
	}
	return out
}

// manifestOf returns a version's workspace manifest.
func (c *Coordinator) manifestOf(ctx context.Context, s session.Session) (*workspace.Manifest, error) {
	if c.manifests == nil {
		return nil, errNoWorkspaces
	}
	id := s.Placement().Snapshot
	m, err := c.manifests.Manifest(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("workspace of version %s: %w", s.ID(), err)
	}
	return m, nil
}

func (c *Coordinator) sessionFiles(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	m, err := c.manifestOf(r.Context(), s)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FilesView{
		ID: s.ID(), Snapshot: s.Placement().Snapshot,
		Files: m.Files(), Bytes: m.TotalBytes(), Entries: fileEntries(m.Entries),
	})
}

// MaxFileContent caps GET /v1/sessions/{id}/files/{path...}: a larger
// file is refused with 413 (restore the snapshot to read it whole).
const MaxFileContent = api.MaxFileContent

// fileReader is what the file-content endpoint needs of Manifests (a
// *workspace.Snapshotter has it).
type fileReader interface {
	ReadFile(ctx context.Context, id, path string, max int64) ([]byte, workspace.Entry, error)
}

// sessionFile serves the bytes of one file of a version's workspace, as
// application/octet-stream, with the file's size, mode and sha256 in
// headers. The version is opened through the caller's tenant-confined
// graph first, so another tenant's version is 404 like a missing one.
func (c *Coordinator) sessionFile(w http.ResponseWriter, r *http.Request) {
	s, ok := c.open(w, r)
	if !ok {
		return
	}
	p := r.PathValue("path")
	if err := workspace.ValidPath(p); err != nil {
		c.fail(w, r, fmt.Errorf("%w: path: %w", ErrBadRequest, err))
		return
	}
	fr, ok := c.manifests.(fileReader)
	if !ok || c.manifests == nil {
		c.fail(w, r, errNoWorkspaces)
		return
	}
	b, e, err := fr.ReadFile(r.Context(), s.Placement().Snapshot, p, MaxFileContent)
	if err != nil {
		c.fail(w, r, fmt.Errorf("workspace of version %s: %w", s.ID(), err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set(api.HeaderFileMode, e.Mode.String())
	h.Set(api.HeaderFileSHA256, e.SHA256)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (c *Coordinator) sessionDiff(w http.ResponseWriter, r *http.Request) {
	a, ok := c.open(w, r)
	if !ok {
		return
	}
	to := r.URL.Query().Get("to")
	if to == "" {
		c.fail(w, r, badRequest("to: required (the version to compare with)"))
		return
	}
	bid, err := session.ParseID(to)
	if err != nil {
		c.fail(w, r, fmt.Errorf("%w: to: %w", ErrBadRequest, err))
		return
	}
	b, err := session.Open(r.Context(), c.graph, bid)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ma, err := c.manifestOf(r.Context(), a)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	mb, err := c.manifestOf(r.Context(), b)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DiffView{
		From: a.ID(), To: b.ID(),
		FromSnapshot: a.Placement().Snapshot, ToSnapshot: b.Placement().Snapshot,
		Changes: fileChanges(workspace.Diff(ma, mb)),
	})
}

// workspaceStatus maps workspace errors to an HTTP status and code; ok is
// false for other errors.
func workspaceStatus(err error) (status int, code string, ok bool) {
	switch {
	case errors.Is(err, errNoWorkspaces):
		return http.StatusServiceUnavailable, "unavailable", true
	case errors.Is(err, workspace.ErrNotFound):
		return http.StatusNotFound, "not_found", true
	case errors.Is(err, workspace.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large", true
	}
	return 0, "", false
}
