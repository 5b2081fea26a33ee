package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testdb"
)

// fakePgbench writes a pgbench stand-in that logs its -T argument to a
// file and prints, on its nth run, the nth of outs.
func fakePgbench(t *testing.T, outs ...string) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "runs")
	var b strings.Builder
	b.WriteString("#!/bin/sh\nwhile [ \"$1\" != -T ]; do shift; done\necho \"$2\" >> " + log + "\nn=$(wc -l < " + log + ")\n")
	for i, o := range outs {
		b.WriteString("if [ \"$n\" -eq " + strconv.Itoa(i+1) + " ]; then cat <<'OUT'\n" + o + "OUT\nexit 0\nfi\n")
	}
	b.WriteString("exit 3\n")
	bin = filepath.Join(dir, "pgbench")
	if err := os.WriteFile(bin, []byte(b.String()), 0o700); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

// pgbench 15's report of a run that finished no transaction: no tps line.
const pgbenchNone = "duration: 1 s\nnumber of transactions actually processed: 0\nnumber of failed transactions: 0 (NaN%)\n"

func TestPgbenchRateRetriesARunThatFinishedNothing(t *testing.T) {
	url := testdb.Postgres(t)
	bin, log := fakePgbench(t, pgbenchNone, pgbenchNone, "number of transactions actually processed: 800\ntps = 200.5 (without initial connection time)\n")
	tps, err := pgbenchRate(t.Context(), bin, url, t.TempDir(), 16, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if tps != 200.5 {
		t.Errorf("tps = %v, want 200.5", tps)
	}
	if runs, _ := os.ReadFile(log); string(runs) != "1\n2\n4\n" {
		t.Errorf("pgbench ran with -T %q, want 1, 2, 4", strings.Fields(string(runs)))
	}
}

func TestPgbenchRateGivesUpAndSaysWhy(t *testing.T) {
	url := testdb.Postgres(t)
	bin, _ := fakePgbench(t, pgbenchNone, pgbenchNone, pgbenchNone, pgbenchNone, pgbenchNone)
	_, err := pgbenchRate(t.Context(), bin, url, t.TempDir(), 1, time.Second)
	if err == nil || !strings.Contains(err.Error(), "after 4 run(s), the last of 8 s") {
		t.Fatalf("err = %v, want one naming the 4 runs", err)
	}
	// Output that is not pgbench's no-transaction report is not retried.
	bin, log := fakePgbench(t, "something else\n", "tps = 1\n")
	if _, err := pgbenchRate(t.Context(), bin, url, t.TempDir(), 1, time.Second); err == nil || !strings.Contains(err.Error(), "after 1 run(s)") {
		t.Fatalf("err = %v, want a failure after one run", err)
	}
	if runs, _ := os.ReadFile(log); string(runs) != "1\n" {
		t.Errorf("pgbench ran with -T %q, want one run", strings.Fields(string(runs)))
	}
}
