package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// The workspace endpoints (docs/api.md, "Workspaces"): a version's
// workspace is the snapshot its placement names, kept in the coordinator's
// workspace store.

// Files lists version id's workspace (GET /v1/sessions/{id}/files).
func (c *Client) Files(ctx context.Context, id session.ID) (*api.FilesView, error) {
	var v api.FilesView
	if err := c.call(ctx, http.MethodGet, sessionPath(id, "files"), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Diff returns the workspace paths that differ from version a's workspace
// to version b's (GET /v1/sessions/{a}/diff?to=b).
func (c *Client) Diff(ctx context.Context, a, b session.ID) (*api.DiffView, error) {
	var v api.DiffView
	if err := c.call(ctx, http.MethodGet, sessionPath(a, "diff")+"?to="+url.QueryEscape(b.String()), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ReadFile returns one regular file of version id's workspace (GET
// /v1/sessions/{id}/files/{path}), at most [api.MaxFileContent] bytes: a
// larger one is a 413. path is slash-separated and relative to the
// workspace root. A path the workspace does not hold, a directory and a
// symlink are [ErrNotFound].
func (c *Client) ReadFile(ctx context.Context, id session.ID, path string) (*api.FileContent, error) {
	if path == "" || strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("read file: path %q: want a slash-separated path relative to the workspace root", path)
	}
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	resp, err := c.sendRaw(ctx, http.MethodGet, sessionPath(id, "files")+"/"+strings.Join(segs, "/"), nil, "")
	if err != nil {
		return nil, translate(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, api.MaxFileContent+1))
	if err != nil {
		return nil, fmt.Errorf("read file %s of %s: %w", path, id, err)
	}
	if len(b) > api.MaxFileContent {
		return nil, errors.New("read file: the reply exceeds api.MaxFileContent")
	}
	fc := &api.FileContent{Path: path, SHA256: resp.Header.Get(api.HeaderFileSHA256), Content: b}
	if m := resp.Header.Get(api.HeaderFileMode); m != "" {
		if fc.Mode, err = api.ParseFileMode(m); err != nil {
			return nil, fmt.Errorf("read file %s of %s: header %s: %w", path, id, api.HeaderFileMode, err)
		}
	}
	return fc, nil
}
