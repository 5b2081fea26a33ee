package migrations_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/rath-run/rath/migrations"
)

// Rolling upgrades run release N's binaries against release N+1's schema
// for a while (docs/deploy.md, "Upgrades"), so a migration may only add:
// tables, nullable or defaulted columns, indexes, views, functions. It may
// not drop, rename or retype what the previous release reads or writes, nor
// add a NOT NULL the previous release does not fill.
//
// A statement that does so is allowed when the same migration puts back
// what it took away — a view, trigger, function, index or constraint
// dropped and created again under the same name; SQLite's table rebuild
// (create x_new, copy, DROP TABLE x, ALTER TABLE x_new RENAME TO x) — or
// when it is listed in allowed with the reason it is safe.
var allowed = map[string]string{
	"postgres/00005_lanes.sql: ALTER TABLE versions ALTER COLUMN lane SET NOT NULL":               "pre-1.0, before rolling upgrades were supported: binaries older than 00005 do not write lane",
	"postgres/00005_lanes.sql: ALTER TABLE chunks ALTER COLUMN lane SET NOT NULL":                 "pre-1.0, as above",
	"postgres/00009_durable_runs.sql: ALTER TABLE steps DROP CONSTRAINT steps_run_id_ordinal_key": "relaxes a constraint: what the previous release writes still satisfies the schema",
	"postgres/00025_steps_hot_updates.sql: DROP INDEX steps_open_idx":                             "an index no statement needs: the previous release's search for stale steps still runs, scanning steps once a reconcile interval until its coordinators are replaced",
	"postgres/00026_runs_state.sql: DROP INDEX runs_status_idx":                                   "an index the previous release's listing by status and searches for open runs read: they still run, scanning runs, until its coordinators are replaced",
	"sqlite/00026_runs_state.sql: DROP INDEX runs_status_idx":                                     "as above (the embedded store runs one release at a time)",
	"sqlite/00025_steps_hot_updates.sql: DROP INDEX steps_open_idx":                               "as above (the embedded store runs one release at a time)",
}

var (
	destructive = regexp.MustCompile(`(?i)^(DROP\s+(TABLE|VIEW|FUNCTION|INDEX|TRIGGER|TYPE|SEQUENCE|SCHEMA)\b|TRUNCATE\b|ALTER\s+TABLE\s+.*\b(DROP\s+(COLUMN|CONSTRAINT)|RENAME)\b)|ALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b|SET\s+NOT\s+NULL\b`)
	dropped     = regexp.MustCompile(`(?i)^(?:DROP\s+(?:TABLE|VIEW|FUNCTION|INDEX|TRIGGER)\s+(?:IF\s+EXISTS\s+)?|ALTER\s+TABLE\s+\S+\s+DROP\s+CONSTRAINT\s+)([\w.]+)`)
	renamed     = regexp.MustCompile(`(?i)^ALTER\s+TABLE\s+(\w+)\s+RENAME\s+TO\s+(\w+)$`)
	lineComment = regexp.MustCompile(`--[^\n]*`)
)

// upStatements returns the normalized statements of a goose file's Up
// section (comments removed, whitespace collapsed).
func upStatements(src string) []string {
	up, _, _ := strings.Cut(src, "-- +goose Down")
	up = lineComment.ReplaceAllString(up, "")
	var out []string
	for st := range strings.SplitSeq(up, ";") {
		if st = strings.Join(strings.Fields(st), " "); st != "" {
			out = append(out, st)
		}
	}
	return out
}

// restored reports whether the Up section puts back what st removed.
func restored(st string, all []string) bool {
	if m := renamed.FindStringSubmatch(st); m != nil {
		// The rebuild's last step: x_new becomes x, which was dropped.
		return strings.Contains(strings.ToUpper(strings.Join(all, ";")), "DROP TABLE "+strings.ToUpper(m[2]))
	}
	m := dropped.FindStringSubmatch(st)
	if m == nil {
		return false
	}
	name := regexp.QuoteMeta(m[1])
	recreate := regexp.MustCompile(`(?i)(CREATE\s+(OR\s+REPLACE\s+)?(UNIQUE\s+)?(TABLE|VIEW|FUNCTION|INDEX|TRIGGER)\s+(IF\s+NOT\s+EXISTS\s+)?` + name + `\b|ADD\s+CONSTRAINT\s+` + name + `\b|RENAME\s+TO\s+` + name + `$)`)
	for _, other := range all {
		if other != st && recreate.MatchString(other) {
			return true
		}
	}
	return false
}

func TestMigrationsOnlyAdd(t *testing.T) {
	seen := map[string]bool{}
	for dialect, fsys := range map[string]fs.FS{"postgres": migrations.Postgres(), "sqlite": migrations.SQLite()} {
		files, err := fs.Glob(fsys, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no %s migrations", dialect)
		}
		for _, f := range files {
			src, err := fs.ReadFile(fsys, f)
			if err != nil {
				t.Fatal(err)
			}
			all := upStatements(string(src))
			for _, st := range all {
				if !destructive.MatchString(st) {
					continue
				}
				key := dialect + "/" + f + ": " + st
				if _, ok := allowed[key]; ok {
					seen[key] = true
					continue
				}
				if !restored(st, all) {
					t.Errorf("%s/%s: %q is not backward compatible with the previous release's binaries "+
						"(docs/deploy.md, Upgrades): add instead, or put it back in the same migration, "+
						"or list it in allowed with the reason it is safe", dialect, f, st)
				}
			}
		}
	}
	for key := range allowed {
		if !seen[key] {
			t.Errorf("allowed lists %q, which no migration contains any more", key)
		}
	}
}

func TestMigrationCheckCatchesBreaks(t *testing.T) {
	for _, tc := range []struct {
		st   string
		all  []string
		safe bool
	}{
		{"ALTER TABLE runs DROP COLUMN budget", nil, false},
		{"ALTER TABLE runs RENAME COLUMN budget TO limits", nil, false},
		{"ALTER TABLE runs ALTER COLUMN budget TYPE jsonb", nil, false},
		{"ALTER TABLE runs ALTER COLUMN budget SET NOT NULL", nil, false},
		{"DROP TABLE memory_terms", nil, false},
		{"DROP VIEW rath_transcript", []string{"CREATE VIEW rath_transcript AS SELECT 1"}, true},
		{"ALTER TABLE steps DROP CONSTRAINT steps_status_check", []string{"ALTER TABLE steps ADD CONSTRAINT steps_status_check CHECK (true)"}, true},
		{"DROP TABLE chunks", []string{"CREATE TABLE chunks_new (x int)", "ALTER TABLE chunks_new RENAME TO chunks"}, true},
	} {
		if !destructive.MatchString(tc.st) {
			t.Errorf("%q not recognized as destructive", tc.st)
			continue
		}
		all := append([]string{tc.st}, tc.all...)
		if got := restored(tc.st, all); got != tc.safe {
			t.Errorf("restored(%q) = %v, want %v", tc.st, got, tc.safe)
		}
	}
	if destructive.MatchString("ALTER TABLE runs ADD COLUMN budget text NOT NULL DEFAULT ''") {
		t.Error("an added defaulted column counted as destructive")
	}
}
