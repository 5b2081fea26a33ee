package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testdb"
)

// TestPostgresRestartsUnderLoad crashes Postgres (pg_ctl stop -m immediate)
// and starts it again 10 times while runs are submitted every 25 ms. The
// coordinator and workers reconnect by themselves.
func TestPostgresRestartsUnderLoad(t *testing.T) {
	t.Parallel()
	pg := startPrivatePG(t)
	_, env := fakeModel(t, 20*time.Millisecond)
	c := newCluster(t, clusterConfig{workers: 2, env: env, storeURL: pg.URL, workerArgs: []string{"--slots", "2"},
		coordArgs: []string{"--reconcile-interval", "1s", "--stale-after", "5s"}})
	restartUnderLoad(t, c, "Postgres", 10*faultScale(t), func() {
		pg.crash()
		pg.start()
	})
}

// privatePG is a Postgres cluster of the test's own, which it may stop and
// start: the shared test cluster serves other tests.
type privatePG struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	URL  string
}

func pgBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("RATH_TEST_PG_BIN"); b != "" {
		return b
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		t.Fatal("no Postgres server binaries: set RATH_TEST_PG_BIN (scripts/testpg.sh start prints it)")
	}
	return filepath.Dir(matches[len(matches)-1])
}

// startPrivatePG initializes and starts a throwaway cluster on a free port.
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	testdb.AdminURL(t) // the same gate as every Postgres test
	dir, err := os.MkdirTemp("", "rath-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p := &privatePG{t: t, bin: pgBin(t), dir: dir, port: freePort(t)}
	if os.Getuid() == 0 {
		// Postgres refuses to run as root: the cluster belongs to postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = p.pgctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if out, err := p.as("initdb", "-D", filepath.Join(dir, "data"), "-U", "rath", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.start()
	p.URL = fmt.Sprintf("postgres://rath@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	return p
}

func (p *privatePG) as(name string, args ...string) ([]byte, error) {
	path := filepath.Join(p.bin, name)
	var cmd *exec.Cmd
	if os.Getuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	return cmd.CombinedOutput()
}

func (p *privatePG) pgctl(args ...string) error {
	out, err := p.as("pg_ctl", append([]string{"-D", filepath.Join(p.dir, "data"), "-w", "-t", "60"}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (p *privatePG) start() {
	p.t.Helper()
	err := p.pgctl("-l", filepath.Join(p.dir, "server.log"), "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", p.port, p.dir), "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		p.t.Fatalf("%v\n%s", err, tail(string(log), 2000))
	}
}

// crash stops the server as a power cut would (immediate mode: no
// checkpoint, recovery from the WAL on the next start).
func (p *privatePG) crash() {
	p.t.Helper()
	if err := p.pgctl("stop", "-m", "immediate"); err != nil {
		p.t.Fatal(err)
	}
}
