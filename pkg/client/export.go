package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/trainset"
)

// ExportTrajectories streams training records (POST
// /v1/export/trajectories, docs/training-data.md) to w as they arrive and
// returns the coordinator's counts. progress, when set, is called with the
// records received so far after every record. A stream the coordinator
// cut short is an error naming its cause; every record before it was
// written whole to w, and the last one's provenance cursor resumes it
// (req.After).
func (c *Client) ExportTrajectories(ctx context.Context, req api.ExportTrajectoriesRequest, w io.Writer, progress func(records int)) (trainset.Stats, error) {
	var st trainset.Stats
	err := c.exportStream(ctx, "/v1/export/trajectories", req, w, progress, &st)
	return st, err
}

// ExportPairs streams DPO preference pairs (POST /v1/export/pairs,
// docs/training-data.md) to w and returns the coordinator's counts, as
// [Client.ExportTrajectories] does.
func (c *Client) ExportPairs(ctx context.Context, req api.ExportPairsRequest, w io.Writer, progress func(records int)) (trainset.PairStats, error) {
	var st trainset.PairStats
	err := c.exportStream(ctx, "/v1/export/pairs", req, w, progress, &st)
	return st, err
}

func (c *Client) exportStream(ctx context.Context, path string, req any, w io.Writer, progress func(int), st any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("POST %s: encode request: %w", path, err)
	}
	resp, err := c.sendRaw(ctx, http.MethodPost, path, bytes.NewReader(body), "application/json")
	if err != nil {
		return translate(err)
	}
	defer resp.Body.Close()
	n, err := copyLines(resp.Body, w, progress)
	if err != nil {
		return fmt.Errorf("POST %s: read reply after %d records: %w", path, n, err)
	}
	if msg := resp.Trailer.Get(api.TrailerExportError); msg != "" {
		return fmt.Errorf("POST %s: the coordinator cut the export short after %d records: %s", path, n, msg)
	}
	raw := resp.Trailer.Get(api.TrailerExportStats)
	if raw == "" {
		return fmt.Errorf("POST %s: the stream ended without its %s trailer after %d records (connection cut?)", path, api.TrailerExportStats, n)
	}
	if err := json.Unmarshal([]byte(raw), st); err != nil {
		return fmt.Errorf("POST %s: %s trailer: %w", path, api.TrailerExportStats, err)
	}
	return nil
}

// copyLines copies r to w, counting newline-ended lines for progress.
func copyLines(r io.Reader, w io.Writer, progress func(int)) (int, error) {
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return n, werr
			}
			if c := bytes.Count(buf[:k], []byte{'\n'}); c > 0 {
				n += c
				if progress != nil {
					progress(n)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
