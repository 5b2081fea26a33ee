package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
)

// GC deletes the caller's tenant's versions nothing keeps that are older
// than keep (POST /v1/admin/gc, admin scope); with dryRun it only reports
// what it would free.
func (c *Client) GC(ctx context.Context, keep time.Duration, dryRun bool) (api.GCReport, error) {
	var out api.GCReport
	err := c.Do(ctx, http.MethodPost, "/v1/admin/gc", api.GCRequest{Keep: keep.String(), DryRun: dryRun}, &out)
	return out, translate(err)
}

// Pin keeps version id and everything it descends from through gc (POST
// /v1/versions/{id}/pin, admin scope). Pinning a pinned version replaces
// its note.
func (c *Client) Pin(ctx context.Context, id session.ID, note string) (api.PinReply, error) {
	var out api.PinReply
	err := c.Do(ctx, http.MethodPost, versionPath(id, "pin"), api.PinRequest{Note: note}, &out)
	return out, translate(err)
}

// Unpin removes version id's pin (DELETE /v1/versions/{id}/pin, admin
// scope). A version that is not pinned is an error matching ErrNotFound.
func (c *Client) Unpin(ctx context.Context, id session.ID) (api.PinReply, error) {
	var out api.PinReply
	err := c.Do(ctx, http.MethodDelete, versionPath(id, "pin"), nil, &out)
	return out, translate(err)
}

// Pins lists the caller's tenant's pinned versions, oldest pin first (GET
// /v1/pins, read scope).
func (c *Client) Pins(ctx context.Context) (api.PinList, error) {
	var out api.PinList
	err := c.Do(ctx, http.MethodGet, "/v1/pins", nil, &out)
	return out, translate(err)
}

// Redact erases chunk ord of version id's transcript, keeping its hash
// (POST /v1/versions/{id}/redact, admin scope). When it returns, no process
// on the coordinator's database serves the erased content.
func (c *Client) Redact(ctx context.Context, id session.ID, ord int, reason string) (api.RedactReply, error) {
	var out api.RedactReply
	err := c.Do(ctx, http.MethodPost, versionPath(id, "redact"), api.RedactRequest{Chunk: ord, Reason: reason}, &out)
	return out, translate(err)
}

// Redactions lists the caller's tenant's recorded redactions and any
// redaction marker no redaction recorded (GET /v1/redactions, admin scope).
func (c *Client) Redactions(ctx context.Context) (api.RedactionList, error) {
	var out api.RedactionList
	err := c.Do(ctx, http.MethodGet, "/v1/redactions", nil, &out)
	return out, translate(err)
}

// Check runs the invariant checker over the caller's tenant's rows (POST
// /v1/admin/check, admin scope). With settled, every run and step must
// also have ended.
func (c *Client) Check(ctx context.Context, settled bool) (api.CheckReport, error) {
	var out api.CheckReport
	err := c.Do(ctx, http.MethodPost, "/v1/admin/check", api.CheckRequest{Settled: settled}, &out)
	return out, translate(err)
}

func versionPath(id session.ID, what string) string {
	return "/v1/versions/" + url.PathEscape(id.String()) + "/" + what
}
