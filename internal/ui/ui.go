// Package ui is Rath's web UI, read-only but for deciding a review: a few
// files of our own HTML, CSS and JavaScript, embedded in the binary (no
// CDN, no build step), served by the coordinator under /ui/. The pages call
// the coordinator's /v1 API from the browser: the runs list with each run's
// steps, a run page that follows the run live over server-sent events (each
// event shown at its own time; each step not yet committed drawn as a
// pending node that fills in with its streamed text and tool calls; a
// waiting run's pending calls with the rathctl commands that decide them; a
// needs_review run's ambiguous calls with the rathctl review commands and
// buttons that POST /v1/runs/{id}/review), the run's session graph drawn as
// SVG from GET /v1/runs/{id}/graph?format=json in a zoomable, pannable
// viewport, and a version panel (transcript, tool calls and results,
// workspace files and diff, memory hits, trace link). Steps link to their
// spans in Jaeger when the coordinator knows its URL.
// docs/observability.md describes it.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Handler serves the UI's files with paths relative to its mount point
// (mount it with http.StripPrefix("/ui", …)): "/" is index.html.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		files.ServeHTTP(w, r)
	})
}
