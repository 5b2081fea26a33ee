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
	const path = "/v1/export/trajectories"
	body, err := json.Marshal(req)
	if err != nil {
		return st, fmt.Errorf("export trajectories: encode request: %w", err)
	}
	resp, err := c.sendRaw(ctx, http.MethodPost, path, bytes.NewReader(body), "application/json")
	if err != nil {
		return st, translate(err)
	}
	defer resp.Body.Close()
	n, err := copyLines(resp.Body, w, progress)
	if err != nil {
		return st, fmt.Errorf("POST %s: read reply after %d records: %w", path, n, err)
	}
	if msg := resp.Trailer.Get(api.TrailerExportError); msg != "" {
		return st, fmt.Errorf("POST %s: the coordinator cut the export short after %d records: %s", path, n, msg)
	}
	raw := resp.Trailer.Get(api.TrailerExportStats)
	if raw == "" {
		return st, fmt.Errorf("POST %s: the stream ended without its %s trailer after %d records (connection cut?)", path, api.TrailerExportStats, n)
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return st, fmt.Errorf("POST %s: %s trailer: %w", path, api.TrailerExportStats, err)
	}
	return st, nil
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
