package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testdb"
	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/session"
)

// importVersions is the size of the files the import attacks upload: large
// enough that a per-version import is caught half-way, small enough to
// generate in about a second.
const importVersions = 20_000

// importFile builds a chain of n versions (a root and n-1 appends, each
// with text naming tag and its position, then pad bytes) and returns its
// session JSONL export and head id.
func importFile(t *testing.T, n int, tag string, pad int) ([]byte, session.ID) {
	t.Helper()
	ctx := context.Background()
	g := session.NewMemoryGraph()
	s, err := session.New(ctx, g, session.User(tag+" 0"+strings.Repeat(".", pad)))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if s, err = s.Append(ctx, session.User(fmt.Sprintf("%s %d%s", tag, i, strings.Repeat(".", pad)))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := session.Export(ctx, g, s.ID(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), s.ID()
}

// tenantVersions counts the versions of tenant in the owner's database.
func tenantVersions(t *testing.T, storeURL, tenant string) int {
	t.Helper()
	db, err := sql.Open("pgx", storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return count(t, db, `SELECT count(*) FROM versions WHERE tenant = $1`, tenant)
}

// cutImport sends an import whose Content-Length promises all of data but
// whose body stops after cut bytes (the client half-closes the connection,
// as a client that dies mid-upload does), and returns the reply's status.
func cutImport(t *testing.T, server, token string, data []byte, cut int) int {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("POST /v1/sessions/import HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n", u.Host, token, len(data))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(data[:cut]); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the reply to a cut import: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	t.Logf("cut import: %d %s", res.StatusCode, strings.TrimSpace(string(body)))
	return res.StatusCode
}

// TestAttackImportAllOrNothing: a tenant with a submit token uploads a
// large import and kills rathctl (SIGKILL) while the coordinator is
// writing it. The test makes "while writing" certain: as the database
// owner it holds a SHARE lock on lineage, so the import's writes block
// after its first versions, and it kills the client once the import waits
// on that lock. No version of the import may be stored: an import is one
// transaction, rolled back when its client goes away. A body cut short
// half-way stores nothing either. A whole import of the same size then
// succeeds, all of it, at a rate the test logs.
func TestAttackImportAllOrNothing(t *testing.T) {
	s := newSecured(t)
	tok := s.mint("submit", "acme")
	owner, err := sql.Open("pgx", s.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()

	// rathctl killed while the coordinator writes the import.
	ctx := context.Background()
	lock, err := owner.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if _, err := lock.Exec(`LOCK TABLE lineage IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	imports := func() int { return strings.Count(s.procs[1].output(), "/v1/sessions/import") }
	before := imports()
	killData, _ := importFile(t, importVersions, "kill", 0)
	cmd := exec.Command(bin(t, "rathctl"), "session", "import", s.writeFile("kill.jsonl", string(killData)))
	cmd.Env = append(os.Environ(), "RATH_SERVER="+s.server, "RATH_HOME="+filepath.Join(s.dir, "home"), "RATH_TOKEN="+tok, "RATH_STORE=")
	var cliOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &cliOut, &cliOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waiting := func() bool {
		var n int
		return owner.QueryRow(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'lineage' AND NOT l.granted`).Scan(&n) == nil && n > 0
	}
	testenv.Eventually(t, time.Minute, "the import waits on the lineage lock", waiting)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	// The coordinator sees its client gone and abandons the write (still
	// under the lock, so nothing can go on behind the test's back).
	testenv.Eventually(t, time.Minute, "the killed import stops waiting", func() bool { return !waiting() })
	testenv.Eventually(t, time.Minute, "the coordinator ends the killed import", func() bool { return imports() > before })
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := tenantVersions(t, s.storeURL, "acme"); n != 0 {
		t.Fatalf("an import whose client was killed mid-write left %d versions stored, want 0 (an import must be all or nothing)", n)
	}

	// A body cut half-way: the server reads a short body.
	cutData, _ := importFile(t, 5_000, "cut", 0)
	if status := cutImport(t, s.server, tok, cutData, len(cutData)/2); status < 400 {
		t.Fatalf("a cut import answered %d, want an error", status)
	}
	if n := tenantVersions(t, s.storeURL, "acme"); n != 0 {
		t.Fatalf("a cut import left %d versions stored, want 0 (an import must be all or nothing)", n)
	}

	// A whole import succeeds, every version of it, for this tenant only.
	data, head := importFile(t, importVersions, "full", 0)
	path := s.writeFile("full.jsonl", string(data))
	start := time.Now()
	out := s.as(tok, "session", "import", path, "-o", "json")
	took := time.Since(start)
	var got struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.ID != head.String() {
		t.Fatalf("import printed %q (%v), want head %s", out, err, head)
	}
	if n := tenantVersions(t, s.storeURL, "acme"); n != importVersions {
		t.Fatalf("after a whole import the tenant has %d versions, want %d", n, importVersions)
	}
	if n := tenantVersions(t, s.storeURL, "umbrella"); n != 0 {
		t.Fatalf("another tenant holds %d versions after acme's import, want 0", n)
	}
	t.Logf("imported %d versions (%d bytes) through rathctl and the coordinator in %v: %.0f versions/s",
		importVersions, len(data), took.Round(time.Millisecond), float64(importVersions)/took.Seconds())
}

// TestAttackImportBodyLimit: an import body over the operator's limit
// (RATH_MAX_IMPORT_BYTES) is refused with an error naming the limit and
// the setting, and stores nothing.
func TestAttackImportBodyLimit(t *testing.T) {
	const limit = 256 << 10
	s := newSecured(t, secOptions{CoordEnv: []string{fmt.Sprintf("RATH_MAX_IMPORT_BYTES=%d", limit)}})
	tok := s.mint("submit", "acme")
	data, _ := importFile(t, 300, "big", 1000)
	if len(data) <= limit {
		t.Fatalf("the test file is %d bytes, not over the %d-byte limit", len(data), limit)
	}
	path := s.writeFile("big.jsonl", string(data))
	_, errOut, code := s.rathctl([]string{"RATH_TOKEN=" + tok}, "", "session", "import", path)
	if code == 0 {
		t.Fatalf("an import of %d bytes passed a %d-byte limit", len(data), limit)
	}
	for _, want := range []string{fmt.Sprint(limit), "RATH_MAX_IMPORT_BYTES"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the refusal does not name %q: %s", want, errOut)
		}
	}
	if n := tenantVersions(t, s.storeURL, "acme"); n != 0 {
		t.Fatalf("a refused import left %d versions stored, want 0", n)
	}
}

// TestImportStoreAllOrNothing: the same with `rathctl --store`, the
// operator's direct path: rathctl killed while it writes an import (held
// mid-way by a SHARE lock on lineage) leaves nothing once Postgres has
// seen the client gone; then the whole import lands, at a rate the test
// logs.
func TestImportStoreAllOrNothing(t *testing.T) {
	storeURL := testdb.Postgres(t)
	dir := t.TempDir()
	rathctl := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin(t, "rathctl"), append(args, "--store", storeURL)...)
		cmd.Env = append(os.Environ(), "RATH_HOME="+filepath.Join(dir, "home"), "RATH_SERVER=", "RATH_TOKEN=", "RATH_STORE=")
		return cmd
	}
	if out, err := rathctl("migrate").CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v: %s", err, out)
	}
	owner, err := sql.Open("pgx", storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	lock, err := owner.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	if _, err := lock.Exec(`LOCK TABLE lineage IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	data, head := importFile(t, importVersions, "store", 0)
	path := filepath.Join(dir, "store.jsonl")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := rathctl("session", "import", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the import waits on the lineage lock", func() bool {
		var n int
		return owner.QueryRow(`SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'lineage' AND NOT l.granted`).Scan(&n) == nil && n > 0
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the killed client's transaction ends", func() bool {
		var n int
		return owner.QueryRow(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`).Scan(&n) == nil && n == 0
	})
	db := func() int {
		var n int
		if err := owner.QueryRow(`SELECT count(*) FROM versions`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := db(); n != 0 {
		t.Fatalf("an import whose rathctl was killed mid-write left %d versions stored, want 0", n)
	}
	start := time.Now()
	out, err := rathctl("session", "import", path, "-o", "json").Output()
	took := time.Since(start)
	var got struct {
		ID string `json:"id"`
	}
	if err != nil || json.Unmarshal(out, &got) != nil || got.ID != head.String() {
		t.Fatalf("import: %v, printed %q; want head %s", err, out, head)
	}
	if n := db(); n != importVersions {
		t.Fatalf("after a whole import the store holds %d versions, want %d", n, importVersions)
	}
	t.Logf("imported %d versions (%d bytes) with rathctl --store in %v: %.0f versions/s",
		importVersions, len(data), took.Round(time.Millisecond), float64(importVersions)/took.Seconds())
}
