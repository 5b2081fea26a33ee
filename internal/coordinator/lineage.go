package coordinator

import (
	"bytes"
	"net/http"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/lineage"
	"github.com/rath-run/rath/pkg/session"
)

// lineageRoutes registers the lineage endpoints (docs/api.md, "Lineage").
func (c *Coordinator) lineageRoutes(api *apiMux) {
	api.HandleFunc("GET /v1/sessions/{id}/graph", c.sessionGraph)
	api.HandleFunc("GET /v1/sessions/{id}/blame", c.sessionBlame)
	api.HandleFunc("GET /v1/runs/{id}/graph", c.runGraph)
	c.lineageOpsRoutes(api)
}

// graphFormat reads ?format= (json when absent).
func graphFormat(r *http.Request) (lineage.Format, error) {
	f := r.URL.Query().Get("format")
	if f == "" {
		return lineage.FormatJSON, nil
	}
	format, err := lineage.ParseFormat(f)
	if err != nil {
		return "", badRequest("%v", err)
	}
	return format, nil
}

// sessionGraph serves the graph of a version and its descendants, or with
// ?depth=N the versions up to N edges around it.
func (c *Coordinator) sessionGraph(w http.ResponseWriter, r *http.Request) {
	format, err := graphFormat(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	var g *lineage.Graph
	if d := r.URL.Query().Get("depth"); d != "" {
		var depth int
		if depth, err = intParam(d, "depth"); err != nil {
			c.fail(w, r, err)
			return
		}
		g, err = lineage.Around(r.Context(), c.graph, id, depth)
	} else {
		g, err = lineage.ForRoot(r.Context(), c.graph, id, nil)
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.writeGraph(w, r, g, format)
}

// runGraph serves the graph of what a run made.
func (c *Coordinator) runGraph(w http.ResponseWriter, r *http.Request) {
	format, err := graphFormat(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	run, err := c.runsOf(r.Context()).Get(r.Context(), r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	g, err := lineage.ForRun(r.Context(), c.graph, runs.Lineage(run.API()))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.writeGraph(w, r, g, format)
}

func (c *Coordinator) writeGraph(w http.ResponseWriter, r *http.Request, g *lineage.Graph, format lineage.Format) {
	if format == lineage.FormatJSON {
		writeJSON(w, http.StatusOK, g) // an api.Graph
		return
	}
	var b bytes.Buffer
	if err := g.Write(&b, format); err != nil {
		c.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", format.ContentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// sessionBlame serves who produced each chunk of a version's transcript.
func (c *Coordinator) sessionBlame(w http.ResponseWriter, r *http.Request) {
	id, err := session.ParseID(r.PathValue("id"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	entries, err := lineage.Blame(r.Context(), c.graph, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Blame{ID: id, Chunks: nonNil(entries)})
}
