package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/llm/llmtest"
	"github.com/rath-run/rath/pkg/session"
)

// TestRedactEverywhereAtOnce runs two coordinator processes and a worker on
// one Postgres database. A run commits a transcript holding a secret (the
// worker read it to call the model); both coordinators serve it (warming
// their caches: transcript and version); then `rathctl redact --store`
// erases the chunk in a third process. As soon as redact returns, both
// coordinators serve the marker and never the secret, through the
// transcript endpoint, the version endpoint and `rathctl session show`,
// and a run continuing the session sends the model the marker's text, not
// the secret: the worker's cache dropped it too. No restart, no purge (the
// redaction epoch of migration 00018).
func TestRedactEverywhereAtOnce(t *testing.T) {
	model, env := fakeModel(t, 0)
	c := newCluster(t, clusterConfig{workers: 1, env: env})
	port := freePort(t)
	second := fmt.Sprintf("http://127.0.0.1:%d", port)
	coord2 := c.add("coordinator", "--store", c.storeURL, "--nats", c.natsURL, "--addr", "127.0.0.1:"+strconv.Itoa(port))
	coord2.start(t)
	c.waitFor("second coordinator ready", 60*time.Second, func() bool {
		resp, err := http.Get(second + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	const secret = "sk-live-E2E-REDACT-31337"
	ctx := context.Background()
	r, err := submitRun(ctx, c.client(), "please remember "+secret)
	if err != nil {
		t.Fatal(err)
	}
	r = c.waitSucceeded(r.ID)
	if !modelSaw(model, secret) {
		t.Fatal("the model was not sent the secret before the redaction (the check below could not fail)")
	}
	if r.Output == nil {
		t.Fatalf("run %s has no output version", r.ID)
	}
	out := r.Output.String()

	type transcript struct {
		Chunks []session.Chunk `json:"chunks"`
	}
	get := func(server, path string) string {
		t.Helper()
		resp, err := http.Get(server + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s: %d %s (%v)", server, path, resp.StatusCode, b, err)
		}
		return string(b)
	}
	secretOrd := -1
	var tr transcript
	for _, server := range []string{c.server, second} {
		body := get(server, "/v1/sessions/"+out+"/transcript")
		if !strings.Contains(body, secret) {
			t.Fatalf("%s: transcript before redaction lacks the secret: %s", server, body)
		}
		if err := json.Unmarshal([]byte(body), &tr); err != nil {
			t.Fatal(err)
		}
		for i, ch := range tr.Chunks {
			if strings.Contains(ch.Text(), secret) {
				secretOrd = i
			}
		}
		// Warm the version caches too, from the input (the run's first
		// version, which stores the chunk) to the output.
		get(server, "/v1/versions/"+r.Input.String())
		get(server, "/v1/versions/"+out)
	}
	if secretOrd < 0 {
		t.Fatal("no chunk holds the secret")
	}

	// rathctl redact with direct store access: a third process.
	cmd := exec.Command(bin(t, "rathctl"), "redact", out, "--chunk", strconv.Itoa(secretOrd), "--reason", "leaked key", "--store", c.storeURL)
	cmd.Env = os.Environ()
	cmd.Dir = c.dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rathctl redact: %v: %s", err, b)
	}

	for _, server := range []string{c.server, second} {
		body := get(server, "/v1/sessions/"+out+"/transcript")
		if strings.Contains(body, secret) {
			t.Errorf("%s serves the erased text after redact returned: %s", server, body)
		}
		if err := json.Unmarshal([]byte(body), &tr); err != nil {
			t.Fatal(err)
		}
		if ch := tr.Chunks[secretOrd]; !ch.Redacted() || ch.RedactionReason() != "leaked key" {
			t.Errorf("%s: chunk %d is not the marker: %s", server, secretOrd, ch.Payload())
		}
		for _, id := range []string{r.Input.String(), out} {
			if body := get(server, "/v1/versions/"+id); strings.Contains(body, secret) {
				t.Errorf("%s: version %s still holds the erased text", server, id)
			}
		}
		show := exec.Command(bin(t, "rathctl"), "session", "show", out)
		show.Env = append(os.Environ(), "RATH_SERVER="+server, "RATH_STORE=")
		show.Dir = c.dir
		b, err := show.CombinedOutput()
		if err != nil {
			t.Fatalf("rathctl session show on %s: %v: %s", server, err, b)
		}
		if strings.Contains(string(b), secret) || !strings.Contains(string(b), session.RedactedText) {
			t.Errorf("rathctl session show on %s after redact:\n%s", server, b)
		}
	}

	// The worker: a run continuing the redacted session sends the model
	// the marker's text.
	before := len(model.Requests())
	var next runs.Run
	if err := c.client().Do(ctx, "POST", "/v1/runs", map[string]any{"agent": faultSpec, "session": out}, &next); err != nil {
		t.Fatal(err)
	}
	c.waitSucceeded(next.ID)
	reqs := model.Requests()[before:]
	if len(reqs) == 0 {
		t.Fatal("the continuing run made no model request")
	}
	for _, rq := range reqs {
		if strings.Contains(string(rq.Body), secret) {
			t.Errorf("the worker sent the model the erased text after redact returned: %s", rq.Body)
		}
		if !strings.Contains(string(rq.Body), session.RedactedText) {
			t.Errorf("the worker's model request lacks the marker text %q: %s", session.RedactedText, rq.Body)
		}
	}
}

// modelSaw reports whether any request to the fake model held s.
func modelSaw(model *llmtest.Server, s string) bool {
	for _, rq := range model.Requests() {
		if strings.Contains(string(rq.Body), s) {
			return true
		}
	}
	return false
}
