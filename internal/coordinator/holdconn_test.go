package coordinator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/testenv"
)

// TestStreamsOutlastServerTimeouts serves the API with 1 s read and write
// timeouts (the slowloris guard, app.HTTPLimits): an event stream and a
// ?wait= long poll, which move their own deadlines, outlast them.
func TestStreamsOutlastServerTimeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, err := app.StartDev(ctx, app.DevConfig{Dir: dir, Addr: "127.0.0.1:0", StoreURL: "sqlite:" + filepath.Join(dir, "rath.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	srv := httptest.NewUnstartedServer(d.Coordinator.Handler())
	srv.Config = app.HTTPLimits{ReadTimeout: time.Second, WriteTimeout: time.Second}.Server(d.Coordinator.Handler())
	srv.Start()
	t.Cleanup(srv.Close)
	call := func(method, path, body string, out any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
	}
	var run struct {
		ID    string `json:"id"`
		Input string `json:"input"`
	}
	// No worker serves the queue "idle": the step stays pending.
	call("POST", "/v1/runs", `{"driver":"client","message":"hold","queue":"idle"}`, &run)
	call("PUT", "/v1/runs/"+run.ID+"/steps/k1", `{"call":`+spec+`,"input":"`+run.Input+`"}`, nil)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/v1/runs/"+run.ID+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", res.StatusCode)
	}
	opened := time.Now()

	// A 3 s long poll of the pending step answers, with the step.
	var st struct {
		Status string `json:"status"`
	}
	t0 := time.Now()
	call("GET", "/v1/runs/"+run.ID+"/steps/k1?wait=3s", "", &st)
	if took := time.Since(t0); st.Status != "pending" || took < 3*time.Second {
		t.Fatalf("long poll: step %q after %s; want pending after the 3 s wait", st.Status, took)
	}
	testenv.Eventually(t, 10*time.Second, "the stream is older than the timeouts", func() bool { return time.Since(opened) > 2500*time.Millisecond })
	call("POST", "/v1/runs/"+run.ID+"/cancel", "", nil)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if sc.Text() == "event: run.canceled" {
			return
		}
	}
	t.Fatalf("the event stream ended without run.canceled after %s: %v", time.Since(opened).Round(time.Millisecond), sc.Err())
}
