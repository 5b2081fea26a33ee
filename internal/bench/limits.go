package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, for the scratch commit loop

	"github.com/rath-run/rath/pkg/store/pgstore"
)

// Limit names figures refer to.
const (
	LimitCommit    = "commits/s"         // single-row INSERT+COMMIT, one client, the store's database
	LimitPgbench   = "pgbench commits/s" // the same through pgbench, when present
	LimitPgbench16 = "pgbench 16 clients commits/s"
	LimitJetStream = "jetstream pub+ack/s"
	LimitDockerCLI = "docker exec ms"
	LimitBudget    = "docs/architecture.md §10 budget"
)

// commitRate runs single-row INSERT+COMMIT transactions, one at a time, on
// a scratch table of the store's own database for d, and returns commits
// per second. On Postgres the table is created and dropped in the store's
// database (the same cluster, WAL and fsync settings as the Session
// Graph); on SQLite it is a scratch file in dir with the store's pragmas
// (WAL, synchronous=NORMAL).
func commitRate(ctx context.Context, storeURL, dir string, d time.Duration) (float64, string, error) {
	if isPostgres(storeURL) {
		return pgCommitRate(ctx, storeURL, d)
	}
	return sqliteCommitRate(ctx, dir, d)
}

func isPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

func pgCommitRate(ctx context.Context, url string, d time.Duration) (float64, string, error) {
	conn, err := pgx.Connect(ctx, pgstore.ConnURL(url))
	if err != nil {
		return 0, "", fmt.Errorf("commit limit: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	table := fmt.Sprintf("rath_bench_commit_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, v int NOT NULL, at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, "", fmt.Errorf("commit limit: create scratch table: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `DROP TABLE `+table) }()
	n, el, err := loopFor(ctx, d, func() error {
		_, err := conn.Exec(ctx, `INSERT INTO `+table+` (v) VALUES (1)`)
		return err
	})
	if err != nil {
		return 0, "", fmt.Errorf("commit limit: insert: %w", err)
	}
	return float64(n) / el.Seconds(), "in-process loop: one-row INSERT, autocommit, 1 connection, Postgres", nil
}

func sqliteCommitRate(ctx context.Context, dir string, d time.Duration) (float64, string, error) {
	path := filepath.Join(dir, "bench-commit.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return 0, "", fmt.Errorf("commit limit: %w", err)
	}
	defer func() {
		_ = db.Close()
		_ = os.Remove(path)
		_ = os.Remove(path + "-wal")
		_ = os.Remove(path + "-shm")
	}()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE c (id INTEGER PRIMARY KEY, v INT NOT NULL, at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)`); err != nil {
		return 0, "", fmt.Errorf("commit limit: create scratch table: %w", err)
	}
	n, el, err := loopFor(ctx, d, func() error {
		_, err := db.ExecContext(ctx, `INSERT INTO c (v) VALUES (1)`)
		return err
	})
	if err != nil {
		return 0, "", fmt.Errorf("commit limit: insert: %w", err)
	}
	return float64(n) / el.Seconds(), "in-process loop: one-row INSERT, autocommit, scratch SQLite file (WAL, synchronous=NORMAL)", nil
}

// loopFor calls fn until d has passed (at least once) and returns the
// number of calls and the time they took.
func loopFor(ctx context.Context, d time.Duration, fn func() error) (int, time.Duration, error) {
	t0 := time.Now()
	n := 0
	for n == 0 || time.Since(t0) < d {
		if err := ctx.Err(); err != nil {
			return n, time.Since(t0), err
		}
		if err := fn(); err != nil {
			return n, time.Since(t0), err
		}
		n++
	}
	return n, time.Since(t0), nil
}

var tpsRE = regexp.MustCompile(`tps = ([0-9.]+)`)

// errNoPgbench is returned when no pgbench binary is found.
var errNoPgbench = errors.New("pgbench not found (PATH, RATH_TEST_PG_BIN, /usr/lib/postgresql/*/bin)")

func findPgbench(getenv func(string) string) (string, error) {
	if dir := getenv("RATH_TEST_PG_BIN"); dir != "" {
		p := filepath.Join(dir, "pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench"); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", errNoPgbench
}

// pgbenchRate runs pgbench for d with one client and a one-row INSERT per
// transaction against url, and returns its tps.
func pgbenchRate(ctx context.Context, pgbench, url, dir string, clients int, d time.Duration) (float64, error) {
	conn, err := pgx.Connect(ctx, pgstore.ConnURL(url))
	if err != nil {
		return 0, fmt.Errorf("pgbench: connect: %w", err)
	}
	table := fmt.Sprintf("rath_bench_pgbench_%d", time.Now().UnixNano())
	_, err = conn.Exec(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, v int NOT NULL, at timestamptz NOT NULL DEFAULT now())`)
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+table)
		_ = conn.Close(context.WithoutCancel(ctx))
	}()
	if err != nil {
		return 0, fmt.Errorf("pgbench: create scratch table: %w", err)
	}
	script := filepath.Join(dir, "pgbench-insert.sql")
	if err := os.WriteFile(script, []byte("INSERT INTO "+table+" (v) VALUES (1);\n"), 0o600); err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(script) }()
	// On a loaded machine the clients can spend a short run connecting
	// and finish no transaction; pgbench then prints no tps at all. Such a
	// run measured nothing, so it is repeated for twice as long, a few
	// times, before the limit is called unmeasurable.
	secs := max(1, int(d.Round(time.Second)/time.Second))
	for try := 1; ; try++ {
		out, err := exec.CommandContext(ctx, pgbench, "-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)), "-T", strconv.Itoa(secs), "-f", script, pgstore.ConnURL(url)).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("pgbench: %w: %s", err, lastLine(out))
		}
		if m := tpsRE.FindSubmatch(out); m != nil {
			return strconv.ParseFloat(string(m[1]), 64)
		}
		if !noTransactionsRE.Match(out) || try == pgbenchTries {
			return 0, fmt.Errorf("pgbench printed no tps after %d run(s), the last of %d s: %s", try, secs, lastLine(out))
		}
		secs *= 2
	}
}

// noTransactionsRE matches pgbench's report of a run that finished no
// transaction, after which it prints no tps.
var noTransactionsRE = regexp.MustCompile(`(?m)^number of transactions actually processed: 0\b`)

// pgbenchTries is how many runs pgbenchRate makes, each twice as long as
// the one before, while pgbench finishes no transaction.
const pgbenchTries = 4

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// jetStreamRate publishes small messages to a scratch file-backed stream
// on nc's server, one at a time, each waiting for its PubAck, for d, and
// returns publishes per second. The stream is deleted afterwards.
func jetStreamRate(ctx context.Context, nc *nats.Conn, d time.Duration) (float64, error) {
	js, err := nc.JetStream(nats.Context(ctx))
	if err != nil {
		return 0, fmt.Errorf("jetstream limit: %w", err)
	}
	name := fmt.Sprintf("RATH_BENCH_%d", time.Now().UnixNano())
	subj := "rath-bench." + name
	if _, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{subj}, Storage: nats.FileStorage, Replicas: 1}); err != nil {
		return 0, fmt.Errorf("jetstream limit: add scratch stream: %w", err)
	}
	defer func() { _ = js.DeleteStream(name) }()
	payload := make([]byte, 256)
	n, el, err := loopFor(ctx, d, func() error {
		_, err := js.Publish(subj, payload, nats.Context(ctx))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("jetstream limit: publish: %w", err)
	}
	return float64(n) / el.Seconds(), nil
}
