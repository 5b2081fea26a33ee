package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// Verify recomputes the hash chain of version id and everything it
// descends from, from the coordinator's stored rows (GET
// /v1/sessions/{id}/verify). Problems are in the report, not an error;
// check [api.VerifyReport.OK]. A version of another tenant, or none, is an
// error matching [ErrNotFound] and [session.ErrNotFound].
func (c *Client) Verify(ctx context.Context, id session.ID) (api.VerifyReport, error) {
	var rep api.VerifyReport
	err := c.Do(ctx, http.MethodGet, sessionPath(id, "verify"), nil, &rep)
	return rep, translate(err)
}

// VerifyAll recomputes every version, chunk and edge of the caller's
// tenant (GET /v1/verify). A tenant with no versions verifies nothing and
// is not OK (see [api.VerifyReport.OK]).
func (c *Client) VerifyAll(ctx context.Context) (api.VerifyReport, error) {
	var rep api.VerifyReport
	err := c.Do(ctx, http.MethodGet, "/v1/verify", nil, &rep)
	return rep, err
}

// DossierOptions choose a dossier's form.
type DossierOptions struct {
	// Format is api.DossierMarkdown (the default) or api.DossierHTML.
	Format string
	// Prices are MODEL=PROMPT/COMPLETION in US dollars per million tokens,
	// for the cost column.
	Prices []string
}

// dossierPath is the dossier endpoint of run with format and prices.
func dossierPath(runID, format string, prices []string) string {
	q := url.Values{"format": {format}}
	for _, p := range prices {
		q.Add("price", p)
	}
	return "/v1/runs/" + url.PathEscape(runID) + "/dossier?" + q.Encode()
}

// Dossier writes run runID's evidence dossier to w as Markdown or HTML
// (GET /v1/runs/{id}/dossier?format=md|html). A run of another tenant, or
// none, is an error matching [ErrNotFound].
func (c *Client) Dossier(ctx context.Context, runID string, opts DossierOptions, w io.Writer) error {
	format := opts.Format
	if format == "" {
		format = api.DossierMarkdown
	}
	if format != api.DossierMarkdown && format != api.DossierHTML {
		return fmt.Errorf("dossier format %q: want %s or %s (DossierData for JSON)", format, api.DossierMarkdown, api.DossierHTML)
	}
	return c.Stream(ctx, http.MethodGet, dossierPath(runID, format, opts.Prices), nil, "", w)
}

// DossierData returns run runID's evidence as data (GET
// /v1/runs/{id}/dossier?format=json); prices as in [DossierOptions].
func (c *Client) DossierData(ctx context.Context, runID string, prices []string) (*api.Dossier, error) {
	var d api.Dossier
	if err := c.Do(ctx, http.MethodGet, dossierPath(runID, api.DossierJSON, prices), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Replay re-executes, in the coordinator, the agent step that made version
// id with its recorded model replies and tool results (no model is
// called, no tool runs again) and compares the hashes (POST
// /v1/versions/{id}/replay). The new version (op replay) branches from the
// step's input; with req.Strict a divergence commits nothing. A
// divergence is in the report (Identical false), not an error.
func (c *Client) Replay(ctx context.Context, id session.ID, req api.ReplayRequest) (api.ReplayReport, error) {
	var rep api.ReplayReport
	err := c.Do(ctx, http.MethodPost, versionPath(id, "replay"), req, &rep)
	return rep, translate(err)
}

// ReplayRun re-executes every step of workflow run id from its recording
// (no model called, no tool run) into a new replay branch and reports per
// step whether the hashes came out identical (POST /v1/runs/{id}/replay).
// A divergence is in the report (Identical false, Diverged naming the
// step), not an error; with req.Strict the replay stops at the first.
func (c *Client) ReplayRun(ctx context.Context, id string, req api.RunReplayRequest) (api.RunReplayReport, error) {
	var rep api.RunReplayReport
	path, err := runOpPath(id, "replay")
	if err != nil {
		return rep, fmt.Errorf("replay run: %w", err)
	}
	err = c.Do(ctx, http.MethodPost, path, req, &rep)
	return rep, translate(err)
}

// RerunRun reruns coordinator-driven workflow run id from its step keyed
// req.From with live models (POST /v1/runs/{id}/rerun): it returns the new
// run, which keeps the steps the From step's input descends from as
// committed and re-executes the rest; wait for it like any run. The
// original run is untouched.
func (c *Client) RerunRun(ctx context.Context, id string, req api.RunRerunRequest) (api.Run, error) {
	var run api.Run
	path, err := runOpPath(id, "rerun")
	if err != nil {
		return run, fmt.Errorf("rerun run: %w", err)
	}
	err = c.Do(ctx, http.MethodPost, path, req, &run)
	return run, translate(err)
}

// IsAncestor reports whether version ancestor is one of the versions of
// descends from, through any parent or base (GET
// /v1/sessions/{id}/ancestors?depth=0).
func (c *Client) IsAncestor(ctx context.Context, ancestor, of session.ID) (bool, error) {
	rel, err := c.Ancestors(ctx, of, 0)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(rel.Versions, func(r store.Relative) bool { return r.ID == ancestor }), nil
}
