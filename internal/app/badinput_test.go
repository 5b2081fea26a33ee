package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rath-run/rath/internal/app"
	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store"
)

// TestBadInputCatalogHTTP sends the bad forms of the API's bodies and
// parameters and checks, for each, the status, a JSON error
// {"error":{"code","message"}} whose message names the field or limit, and
// that nothing was half-written (the counts of versions and runs do not
// change). docs/RELIABILITY.md ("Bad input") lists the catalog.
func TestBadInputCatalogHTTP(t *testing.T) {
	t.Parallel()
	s := startDev(t, "", app.DevConfig{Workers: -1})
	ctx := context.Background()
	in, err := session.FromUserMessage(ctx, s.dev.Backend.Store, "hi")
	if err != nil {
		t.Fatal(err)
	}
	id := in.ID().String()
	// A session JSONL export of a graph this stack has never seen, three
	// versions deep, whose later lines the import cases break: a good
	// prefix must not be written when a later line is bad.
	foreign := session.NewMemoryGraph()
	fs, err := session.FromUserMessage(ctx, foreign, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"two", "three"} {
		if fs, err = fs.Append(ctx, session.User(text)); err != nil {
			t.Fatal(err)
		}
	}
	var export bytes.Buffer
	if err := session.Export(ctx, foreign, fs.ID(), &export); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(export.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("export has %d lines, want a header and 3 versions", len(lines))
	}
	brokenAt := func(n int, fix func(string) string) string {
		out := slices.Clone(lines)
		out[n-1] = fix(out[n-1])
		return strings.Join(out, "") + "\n"
	}
	cut := func(l string) string { return l[:len(l)/2] + "\n" }
	tamper := func(l string) string { return strings.Replace(l, "three", "THREE", 1) }
	spec := func(extra string) string {
		return `{"agent":{"name":"a","model":"scripted","script":["x"]` + extra + `},"message":"hi"}`
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"run: unknown field", "POST", "/v1/runs", `{"agent":{},"mesage":"hi"}`, 400, `unknown field "mesage"`},
		{"run: wrong type", "POST", "/v1/runs", `{"agent":{"name":"a"},"message":5}`, 400, "message"},
		{"run: not JSON", "POST", "/v1/runs", `{"agent":`, 400, "request body"},
		{"run: oversized body", "POST", "/v1/runs", `{"message":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "exceeds 1048576 bytes"},
		{"run: no agent", "POST", "/v1/runs", `{"message":"hi"}`, 400, "agent: required"},
		{"run: agent unknown key", "POST", "/v1/runs", spec(`,"tols":["builtin"]`), 400, "tols"},
		{"run: agent bad name", "POST", "/v1/runs", `{"agent":{"name":"Bad Name","model":"scripted","script":["x"]},"message":"hi"}`, 400, "name"},
		{"run: agent bad limit", "POST", "/v1/runs", spec(`,"limits":{"max_tool_rounds":-1}`), 400, "limits.max_tool_rounds"},
		{"run: agent empty approve entry", "POST", "/v1/runs", spec(`,"approve":[""]`), 400, "approve[0]"},
		{"run: bad queue", "POST", "/v1/runs", `{"agent":{"name":"a","model":"scripted","script":["x"]},"message":"hi","queue":"Bad Queue"}`, 400, "queue"},
		{"run: bad budget", "POST", "/v1/runs", `{"agent":{"name":"a","model":"scripted","script":["x"]},"message":"hi","budget":{"max_tokens":-5}}`, 400, "budget.max_tokens"},
		{"run: bad session id", "POST", "/v1/runs", `{"agent":{"name":"a","model":"scripted","script":["x"]},"session":"nope"}`, 400, "session"},
		{"run: both inputs", "POST", "/v1/runs", `{"agent":{"name":"a","model":"scripted","script":["x"]},"session":"` + id + `","message":"hi"}`, 400, "not both"},
		{"runs: bad limit", "GET", "/v1/runs?limit=-1", ``, 400, "limit"},
		{"run: unknown id", "GET", "/v1/runs/run_nope", ``, 404, "run_nope"},
		{"session: bad id", "GET", "/v1/sessions/not-a-uuid", ``, 400, "not-a-uuid"},
		{"sessions: bad limit", "GET", "/v1/sessions?limit=x", ``, 400, "limit"},
		{"append: unknown kind", "POST", "/v1/sessions/" + id + "/append", `{"chunks":[{"kind":"wizard","payload":{}}]}`, 400, "wizard"},
		{"append: approval chunk", "POST", "/v1/sessions/" + id + "/append", `{"chunks":[{"kind":"approval","payload":{"call_id":"c","tool":"t","decision":"approved"}}]}`, 400, "chunks[0].kind"},
		{"append: nothing", "POST", "/v1/sessions/" + id + "/append", `{}`, 400, "give user"},
		{"merge: bad other", "POST", "/v1/sessions/" + id + "/merge", `{"other":"x"}`, 400, "other"},
		{"import: truncated", "POST", "/v1/sessions/import", `{"record":"rath.session","schema_version":1,"he`, 400, "line 1"},
		{"import: bad line 4 after good ones", "POST", "/v1/sessions/import", brokenAt(4, cut), 400, "line 4"},
		{"import: tampered chunk on line 4", "POST", "/v1/sessions/import", brokenAt(4, tamper), 400, "line 4"},
		{"import: not JSON on line 3", "POST", "/v1/sessions/import", brokenAt(3, func(string) string { return "hello\n" }), 400, "line 3"},
		{"append: oversized body", "POST", "/v1/sessions/" + id + "/append", `{"chunks":[{"kind":"user","payload":{"content":"` + strings.Repeat("x", 2<<20) + `"}}]}`, 413, "exceeds 1048576 bytes"},
		{"import: schema_version", "POST", "/v1/sessions/import", `{"record":"rath.session","schema_version":99,"head":"` + id + `"}` + "\n", 400, "schema_version"},
		{"approvals: unknown field", "POST", "/v1/runs/run_nope/approvals", `{"decision":"approve","why":"x"}`, 400, `unknown field "why"`},
		{"approvals: bad decision", "POST", "/v1/runs/run_nope/approvals", `{"decision":"yes"}`, 400, "decision"},
		{"approvals: reject without reason", "POST", "/v1/runs/run_nope/approvals", `{"decision":"reject"}`, 400, "reason"},
		{"approvals: unknown run", "POST", "/v1/runs/run_nope/approvals", `{"decision":"approve"}`, 404, "run_nope"},
	}
	counts := func() (int, int) {
		page, err := s.dev.Backend.Store.List(ctx, store.ListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.dev.Backend.Runs.List(ctx, runs.ListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Versions), len(rs)
	}
	for _, c := range cases {
		v0, r0 := counts()
		req, err := http.NewRequestWithContext(ctx, c.method, s.dev.URL+c.path, bytes.NewBufferString(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var body struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &body); err != nil || body.Error.Code == "" {
			t.Errorf("%s: body %q is not a JSON error: %v", c.name, raw, err)
			continue
		}
		if resp.StatusCode != c.status || !strings.Contains(body.Error.Message, c.want) {
			t.Errorf("%s: %d %s %q; want %d mentioning %q", c.name, resp.StatusCode, body.Error.Code, body.Error.Message, c.status, c.want)
		}
		if v1, r1 := counts(); v1 != v0 || r1 != r0 {
			t.Errorf("%s: half-written: versions %d → %d, runs %d → %d", c.name, v0, v1, r0, r1)
		}
	}
}
