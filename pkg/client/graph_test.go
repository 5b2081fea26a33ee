package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// countingTransport answers every request with body and counts them.
type countingTransport struct {
	body []byte
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
}

// TestGraphGetAsksEveryTime: Graph keeps no cache of versions, whose
// chunks a redaction may change, so each Get reaches the coordinator and a
// redaction takes effect in the client's process as soon as it returns.
func TestGraphGetAsksEveryTime(t *testing.T) {
	t.Parallel()
	id := "0199a3a4-7d5c-7000-8000-000000000000"
	tr := &countingTransport{body: []byte(`{"id":"` + id + `","op":"create","len":0,"hash":"ab"}`)}
	c, err := New("http://coordinator.invalid", "tok")
	if err != nil {
		t.Fatal(err)
	}
	c.http = &http.Client{Transport: tr}
	g := c.Graph()
	for range 3 {
		if _, err := g.Get(context.Background(), uuid.MustParse(id)); err != nil {
			t.Fatal(err)
		}
	}
	if n := tr.n.Load(); n != 3 {
		t.Errorf("3 Gets made %d requests, want 3 (no cache)", n)
	}
}
