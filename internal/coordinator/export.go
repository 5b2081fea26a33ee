package coordinator

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/trainset"
)

// exportTrajectories streams training records (package trainset) for the
// request's tenant. The request is checked whole before the first byte, so
// a bad one is a 400; a failure after that ends the stream and is named in
// the api.TrailerExportError trailer.
func (c *Coordinator) exportTrajectories(w http.ResponseWriter, r *http.Request) {
	var req api.ExportTrajectoriesRequest
	if !c.decode(w, r, &req) {
		return
	}
	format, err := trainset.ParseFormat(req.Format)
	if err != nil {
		c.fail(w, r, badRequest("%v", err))
		return
	}
	red, err := trainset.ParseRedacted(req.Redacted)
	if err != nil {
		c.fail(w, r, badRequest("%v", err))
		return
	}
	if req.After != "" {
		if _, _, err := trainset.DecodeCursor(req.After); err != nil {
			c.fail(w, r, badRequest("%v", err))
			return
		}
	}
	holdConn(w, transferWindow)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Trailer", api.TrailerExportError+", "+api.TrailerExportStats)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	sel := trainset.Selector{Run: req.Run, Agent: req.Agent, Since: req.Since, Until: req.Until}
	stats, err := trainset.Export(r.Context(), c.graph, sel, trainset.Options{
		Format: format, Redacted: red, Tools: req.Tools, After: req.After,
		Progress: func(trainset.Stats) {
			if flusher != nil {
				flusher.Flush()
			}
		},
	}, w)
	if b, merr := json.Marshal(stats); merr == nil {
		w.Header().Set(api.TrailerExportStats, string(b))
	}
	if err != nil {
		w.Header().Set(api.TrailerExportError, err.Error())
		c.log.WarnContext(r.Context(), "trajectory export cut short", slog.Any("error", err))
	}
}

// exportPairs streams DPO pairs (trainset.Pairs) for the request's tenant.
func (c *Coordinator) exportPairs(w http.ResponseWriter, r *http.Request) {
	var req api.ExportPairsRequest
	if !c.decode(w, r, &req) {
		return
	}
	red, err := trainset.ParseRedacted(req.Redacted)
	if err != nil {
		c.fail(w, r, badRequest("%v", err))
		return
	}
	from, err := trainset.ParsePairSources(req.From)
	if err != nil {
		c.fail(w, r, badRequest("from: %v", err))
		return
	}
	holdConn(w, transferWindow)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Trailer", api.TrailerExportError+", "+api.TrailerExportStats)
	w.WriteHeader(http.StatusOK)
	sel := trainset.Selector{Run: req.Run, Agent: req.Agent, Since: req.Since, Until: req.Until}
	stats, err := trainset.Pairs(r.Context(), c.graph, sel, trainset.PairOptions{Redacted: red, From: from}, w)
	if b, merr := json.Marshal(stats); merr == nil {
		w.Header().Set(api.TrailerExportStats, string(b))
	}
	if err != nil {
		w.Header().Set(api.TrailerExportError, err.Error())
		c.log.WarnContext(r.Context(), "pairs export cut short", slog.Any("error", err))
	}
}
