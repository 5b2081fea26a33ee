package bus

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestDecodeJobRefusesOversizedBody: a delivered job over MaxJobSize (which
// Publish refuses, but the stream's limit, with room for headers, lets
// through from another publisher) is ErrMalformedJob naming the limit, even
// when it is otherwise a valid job; one at the limit decodes.
func TestDecodeJobRefusesOversizedBody(t *testing.T) {
	t.Parallel()
	body := func(n int) []byte {
		head := `{"v":1,"step_id":"run_a/0","run_id":"run_a","queue":"default","input":"0199a3a4-7d5c-7000-8000-000000000000","target":{"name":"a"},"created_at":"2026-01-01T00:00:00Z","pad":"`
		return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
	}
	hdr := nats.Header{HeaderJobVersion: {"1"}}
	if _, err := decodeJob(hdr, body(MaxJobSize)); err != nil {
		t.Fatalf("a job of exactly MaxJobSize bytes: %v", err)
	}
	_, err := decodeJob(hdr, body(MaxJobSize+1))
	if !errors.Is(err, ErrMalformedJob) || !strings.Contains(err.Error(), "MaxJobSize") {
		t.Fatalf("a job of MaxJobSize+1 bytes: %v, want ErrMalformedJob naming MaxJobSize", err)
	}
}
