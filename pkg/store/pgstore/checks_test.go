package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/pgstore"
)

// The value lists of migration 00028's domains, as they stood in the
// tables' CHECK constraints before it.
var (
	versionOps   = []string{"create", "append", "step", "fork", "detach", "merge", "compress", "replay", "import", "redact", "place"}
	runStatuses  = []string{"pending", "running", "waiting", "succeeded", "failed", "canceled", "timed_out"}
	runKinds     = []string{"agent", "workflow"}
	stepStatuses = []string{"pending", "running", "waiting", "committed", "failed", "canceled"}
)

// TestValueListsRefuseOthers holds the value lists of versions.op,
// runs.status, runs.kind and steps.status (checked through domains since
// migration 00028) to what they were: every listed value is stored, and
// any other is refused with check_violation, on insert and on update.
func TestValueListsRefuseOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t, pgstore.Options{})
	root, err := session.FromUserMessage(ctx, st, "input")
	if err != nil {
		t.Fatal(err)
	}
	in := root.ID().String()
	n := 0
	// try runs q in a transaction that is rolled back, so each value is
	// tried on the same rows.
	try := func(q func(tx pgx.Tx) error) error {
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		return q(tx)
	}
	newRun := func(tx pgx.Tx, status, kind string) (string, error) {
		n++
		id := fmt.Sprintf("run-%d", n)
		_, err := tx.Exec(ctx, `INSERT INTO runs (id, status, queue, target, input_id, created_at, updated_at, kind)
			VALUES ($1, $2, 'q', 't', $3, now(), now(), $4)`, id, status, in, kind)
		return id, err
	}
	newStep := func(tx pgx.Tx, run, status string) (string, error) {
		id := run + "-s"
		_, err := tx.Exec(ctx, `INSERT INTO steps (id, run_id, ordinal, status, input_id, created_at, updated_at)
			VALUES ($1, $2, 0, $3, $4, now(), now())`, id, run, status, in)
		return id, err
	}
	newVersion := func(tx pgx.Tx, op string) error {
		_, err := tx.Exec(ctx, `INSERT INTO versions (id, op, len, own_count, parent_count, created_at, hash, lane, tenant)
			SELECT g, $1, 0, 0, 0, now(), repeat('a', 64), g, 'default' FROM gen_random_uuid() g`, op)
		return err
	}
	cases := []struct {
		what  string
		good  []string
		write func(tx pgx.Tx, v string) error
	}{
		{"versions.op on insert", versionOps, newVersion},
		{"runs.status on insert", runStatuses,
			func(tx pgx.Tx, v string) error { _, err := newRun(tx, v, "agent"); return err }},
		{"runs.status on update", runStatuses,
			func(tx pgx.Tx, v string) error {
				id, err := newRun(tx, "pending", "agent")
				if err != nil {
					t.Fatal(err)
				}
				_, err = tx.Exec(ctx, `UPDATE runs SET status = $2 WHERE id = $1`, id, v)
				return err
			}},
		{"runs.kind on insert", runKinds,
			func(tx pgx.Tx, v string) error { _, err := newRun(tx, "pending", v); return err }},
		{"steps.status on insert", stepStatuses,
			func(tx pgx.Tx, v string) error {
				run, err := newRun(tx, "pending", "agent")
				if err != nil {
					t.Fatal(err)
				}
				_, err = newStep(tx, run, v)
				return err
			}},
		{"steps.status on update", stepStatuses,
			func(tx pgx.Tx, v string) error {
				run, err := newRun(tx, "pending", "agent")
				if err != nil {
					t.Fatal(err)
				}
				id, err := newStep(tx, run, "pending")
				if err != nil {
					t.Fatal(err)
				}
				_, err = tx.Exec(ctx, `UPDATE steps SET status = $2 WHERE id = $1`, id, v)
				return err
			}},
	}
	for _, c := range cases {
		for _, v := range c.good {
			if err := try(func(tx pgx.Tx) error { return c.write(tx, v) }); err != nil {
				t.Errorf("%s: %q refused: %v", c.what, v, err)
			}
		}
		for _, v := range []string{"bogus", "", "Pending", c.good[0] + " "} {
			err := try(func(tx pgx.Tx) error { return c.write(tx, v) })
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "23514" {
				t.Errorf("%s: %q: got %v, want check_violation (23514)", c.what, v, err)
			}
		}
	}
}

// BenchmarkValueListCheck measures what a one-row INSERT pays for a table
// CHECK on a list of values, written as before migration 00028 (the list
// in the table's constraint) and as since (a cast to a domain that holds
// it), against no check at all, on scratch tables of the migrated store:
// Postgres prepares a table's constraints for every statement.
func BenchmarkValueListCheck(b *testing.B) {
	ctx := context.Background()
	st := openStore(b, pgstore.Options{})
	list := `('` + strings.Join(runStatuses, `', '`) + `')`
	for _, f := range []struct{ name, check string }{
		{"list", `CHECK (status IN ` + list + `)`},
		{"domain", `CHECK ((status::rath_run_status) IS NOT NULL)`},
		{"none", ``},
	} {
		b.Run(f.name, func(b *testing.B) {
			table := "bench_check_" + f.name
			if _, err := st.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (status text NOT NULL `+f.check+`)`); err != nil {
				b.Fatal(err)
			}
			// The inserts run in a loop on the server, one statement each
			// with its plan cached, so the figure is the statement's, not a
			// round trip's or a commit's; the transaction is rolled back.
			loop := fmt.Sprintf(`DO $$BEGIN FOR i IN 1..%d LOOP INSERT INTO %s VALUES ('running'); END LOOP; END$$`, b.N, table)
			b.ResetTimer()
			if _, err := st.Pool().Exec(ctx, `BEGIN; `+loop+`; ROLLBACK`); err != nil {
				b.Fatal(err)
			}
		})
	}
}
