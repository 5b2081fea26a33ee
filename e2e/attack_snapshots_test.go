package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/pkg/api"
	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// call calls the coordinator's API with token and returns the status and
// body.
func (s *secured) call(token, method, path, contentType string, body []byte) (int, string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.server+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return res.StatusCode, string(b)
}

// placedOn builds, offline, a version that places token's own version id on
// snapshot (op place, as session.To does) and returns it with the graph
// holding both, ready to send as POST /v1/versions or as an import.
func (s *secured) placedOn(token string, id session.ID, snapshot string) (*session.Version, *session.MemoryGraph) {
	s.t.Helper()
	code, body := s.call(token, "GET", "/v1/versions/"+id.String(), "", nil)
	if code != http.StatusOK {
		s.t.Fatalf("GET /v1/versions/%s: %d %s", id, code, body)
	}
	var own session.Version
	if err := json.Unmarshal([]byte(body), &own); err != nil {
		s.t.Fatalf("version %s: %v", id, err)
	}
	g := session.NewMemoryGraph()
	ctx := context.Background()
	if _, err := g.Put(ctx, &own); err != nil {
		s.t.Fatalf("put %s in memory: %v", id, err)
	}
	placed, err := session.Wrap(g, &own).To(ctx, session.Placement{Backend: "local", Snapshot: snapshot})
	if err != nil {
		s.t.Fatalf("place %s: %v", id, err)
	}
	return placed.Version(), g
}

// newSession makes a one-message session as token and returns its id.
func (s *secured) newSession(token, text string) session.ID {
	s.t.Helper()
	code, body := s.call(token, "POST", "/v1/sessions", "application/json", fmt.Appendf(nil, `{"user":%q}`, text))
	if code != http.StatusCreated {
		s.t.Fatalf("POST /v1/sessions: %d %s", code, body)
	}
	var v struct {
		ID session.ID `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		s.t.Fatalf("new session: %v", err)
	}
	return v.ID
}

// TestAttackSnapshotByID is finding 8: a workspace snapshot id is the
// sha256 of its manifest, so it can be learnt or computed offline. Umbrella,
// with an ordinary submit token, names acme's snapshot in a placement (POST
// /v1/versions, and a session import) and would then list acme's files
// through its own version. A placement may name only a snapshot that a
// version of the caller's tenant already holds: both are refused naming
// placement.snapshot, with not-found wording, and nothing is written. Acme
// placing its own snapshot still works.
func TestAttackSnapshotByID(t *testing.T) {
	t.Parallel()
	s := newSecured(t, allowLocal(t))
	acme := s.mint("submit", "acme")
	umbrella := s.mint("submit", "umbrella")

	// Acme's step writes a secret into its workspace.
	const secretFile, secret = "acme-payroll.txt", "acme payroll: 1.2M, do not share"
	agent := s.writeFile("writer.json", fmt.Sprintf(`{
  "name": "writer", "model": "scripted", "tools": ["builtin"],
  "script": [
    {"tool_calls": [{"id": "w1", "function": {"name": "write_workspace_file", "arguments": {"path": %q, "content": %q}}}]},
    {"content": "saved"}
  ]
}`, secretFile, secret))
	out := s.as(acme, "run", "--agent", agent, "--message", "keep the payroll", "-o", "json")
	var r runs.Run
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("run output %q: %v", out, err)
	}
	r = s.waitRun(acme, r.ID)
	if r.Status != runs.RunSucceeded || r.Output == nil {
		t.Fatalf("acme's run ended %s (%s)", r.Status, r.Error)
	}

	// The snapshot id: read from the owner's database, a stand-in for
	// computing it offline from guessable contents.
	db, err := sql.Open("pgx", s.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var snap string
	if err := db.QueryRow(`SELECT placement->>'snapshot' FROM versions WHERE id = $1`, r.Output.String()).Scan(&snap); err != nil || snap == "" {
		t.Fatalf("acme's output %s has no snapshot (%q): %v", r.Output, snap, err)
	}

	// Umbrella places its own session on acme's snapshot.
	own := s.newSession(umbrella, "umbrella's own session")
	forged, g := s.placedOn(umbrella, own, snap)
	body, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	code, resp := s.call(umbrella, "POST", "/v1/versions", "application/json", body)
	if code == http.StatusCreated {
		// Today: umbrella now reads acme's workspace through its version.
		_, files := s.call(umbrella, "GET", "/v1/sessions/"+forged.ID.String()+"/files", "", nil)
		t.Errorf("umbrella's POST /v1/versions naming acme's snapshot was accepted (201); its files: %s", files)
	}
	refusedNotFound(t, "POST /v1/versions", code, resp)

	// The same through an import: a JSONL whose version places umbrella's
	// session on acme's snapshot.
	forged2, _ := s.placedOn(umbrella, own, snap)
	if _, err := g.Put(context.Background(), forged2); err != nil {
		t.Fatal(err)
	}
	var jsonl bytes.Buffer
	if err := session.Export(context.Background(), g, forged2.ID, &jsonl); err != nil {
		t.Fatal(err)
	}
	code, resp = s.call(umbrella, "POST", "/v1/sessions/import", "application/x-ndjson", jsonl.Bytes())
	if code == http.StatusCreated {
		_, files := s.call(umbrella, "GET", "/v1/sessions/"+forged2.ID.String()+"/files", "", nil)
		t.Errorf("umbrella's import naming acme's snapshot was accepted (201); its files: %s", files)
	}
	refusedNotFound(t, "POST /v1/sessions/import", code, resp)

	// Nothing was written: no version of umbrella names the snapshot, and
	// neither forged version exists.
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM versions WHERE tenant = 'umbrella' AND placement->>'snapshot' = $1`, snap).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d version(s) of umbrella name acme's snapshot", n)
	}
	for _, id := range []session.ID{forged.ID, forged2.ID} {
		if code, resp := s.call(umbrella, "GET", "/v1/sessions/"+id.String()+"/files", "", nil); code != http.StatusNotFound || strings.Contains(resp, secretFile) {
			t.Errorf("umbrella GET files of %s: %d %s", id, code, resp)
		}
	}
	// Files and diff reach acme's workspace only through acme's versions.
	if code, resp := s.call(umbrella, "GET", "/v1/sessions/"+r.Output.String()+"/files", "", nil); code != http.StatusNotFound || strings.Contains(resp, secretFile) {
		t.Errorf("umbrella GET files of acme's version: %d %s", code, resp)
	}
	// A file's bytes too: 404 for umbrella, the content for acme (also
	// through rathctl session cat).
	filePath := "/v1/sessions/" + r.Output.String() + "/files/" + secretFile
	if code, resp := s.call(umbrella, "GET", filePath, "", nil); code != http.StatusNotFound || strings.Contains(resp, secret) {
		t.Errorf("umbrella GET a file of acme's version: %d %s", code, resp)
	}
	if code, resp := s.call(acme, "GET", filePath, "", nil); code != http.StatusOK || resp != secret {
		t.Errorf("acme GET its own file: %d %q", code, resp)
	}
	if out := s.as(acme, "session", "cat", r.Output.String(), secretFile); out != secret {
		t.Errorf("acme's rathctl session cat = %q, want %q", out, secret)
	}
	if out, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + umbrella}, "", "session", "cat", r.Output.String(), secretFile); code != 4 ||
		strings.Contains(out+errOut, secret) {
		t.Errorf("umbrella's rathctl session cat of acme's file: exit %d, %q %q", code, out, errOut)
	}
	if code, resp := s.call(umbrella, "GET", "/v1/sessions/"+own.String()+"/diff?to="+r.Output.String(), "", nil); code != http.StatusNotFound || strings.Contains(resp, secretFile) {
		t.Errorf("umbrella diff against acme's version: %d %s", code, resp)
	}

	// Acme placing a version of its own on its own snapshot is fine, and
	// reads its file.
	mine := s.newSession(acme, "acme's second session")
	placed, _ := s.placedOn(acme, mine, snap)
	body, err = json.Marshal(placed)
	if err != nil {
		t.Fatal(err)
	}
	if code, resp := s.call(acme, "POST", "/v1/versions", "application/json", body); code != http.StatusCreated {
		t.Fatalf("acme placing its own snapshot: %d %s", code, resp)
	}
	code, resp = s.call(acme, "GET", "/v1/sessions/"+placed.ID.String()+"/files", "", nil)
	var files api.FilesView
	if code != http.StatusOK || json.Unmarshal([]byte(resp), &files) != nil || len(files.Entries) != 1 || files.Entries[0].Path != secretFile {
		t.Errorf("acme's files of its placed version: %d %s", code, resp)
	}
}

// refusedNotFound checks an attempt to name another tenant's snapshot was
// refused as not found, naming the field, without saying the id exists.
func refusedNotFound(t *testing.T, what string, code int, resp string) {
	t.Helper()
	t.Logf("%s: %d %s", what, code, strings.TrimSpace(resp))
	if code != http.StatusNotFound || !strings.Contains(resp, "placement.snapshot") {
		t.Errorf("%s naming another tenant's snapshot: got %d %s, want 404 naming placement.snapshot", what, code, resp)
	}
	for _, leak := range []string{"acme", "another tenant", "exists"} {
		if strings.Contains(resp, leak) {
			t.Errorf("%s: the refusal says %q: %s", what, leak, resp)
		}
	}
}

// rathctlStore runs rathctl against a store URL (no coordinator) and
// returns its combined output and exit code.
func rathctlStore(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin(t, "rathctl"), args...)
	cmd.Env = append(os.Environ(), "RATH_HOME="+filepath.Join(t.TempDir(), "home"), "RATH_TOKEN=", "RATH_SERVER=")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("rathctl %v: %v", args, err)
	return "", -1
}

// TestAttackForgedRedactionMarker is finding 12: a redaction marker keeps
// the chunk's hash, the reason and, for tool calls, their ids and names.
// The owner of the database (or a superuser) disables the triggers and
// rewrites a marker's tool names and call ids; `rathctl verify --all` must
// then fail naming the chunk row, while an honest redaction verifies.
func TestAttackForgedRedactionMarker(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := session.New(ctx, st, session.User("pay the invoice"))
	if err != nil {
		t.Fatal(err)
	}
	s, err = s.Append(ctx,
		session.Assistant("", session.ToolCall{ID: "call_pay", Function: session.FunctionCall{Name: "wire_transfer", Arguments: `{"iban":"DE00 1234","amount":90000}`}}),
		session.ToolResultChunk(session.ToolResult{ToolCallID: "call_pay", Name: "wire_transfer", Content: `{"ok":true,"iban":"DE00 1234"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	id := s.ID().String()
	for _, ord := range []string{"1", "2"} {
		if out, code := rathctlStore(t, "redact", id, "--chunk", ord, "--reason", "bank details", "--store", url); code != 0 {
			t.Fatalf("redact chunk %s: exit %d: %s", ord, code, out)
		}
	}
	if out, code := rathctlStore(t, "verify", "--all", "--store", url); code != 0 {
		t.Fatalf("verify after honest redactions: exit %d: %s", code, out)
	}

	// The owner forges both markers: the call looks like a harmless tool.
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`ALTER TABLE chunks DISABLE TRIGGER USER`,
		`UPDATE chunks SET payload = replace(replace(payload, 'wire_transfer', 'get_weather'), 'call_pay', 'call_wx') WHERE starts_with(payload, '{"rath_redacted":')`,
		`ALTER TABLE chunks ENABLE TRIGGER USER`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	out, code := rathctlStore(t, "verify", "--all", "--store", url)
	if code != 1 {
		t.Fatalf("verify after forging the markers' tool names and call ids: exit %d, want 1: %s", code, out)
	}
	for _, ord := range []string{"1", "2"} {
		if want := fmt.Sprintf("version %s: chunk %s:", id, ord); !strings.Contains(out, want) {
			t.Errorf("verify does not name the forged chunk (%q): %s", want, out)
		}
	}
}
