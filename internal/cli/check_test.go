package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/rath-run/rath/internal/check"
)

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := migrated(t, filepath.Join(t.TempDir(), "rath.db"))
	var out, errOut bytes.Buffer
	for _, args := range [][]string{
		{"session", "new", "--store", url, "--user", "hello"},
	} {
		if code := Main(ctx, args, nil, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
	}
	out.Reset()
	if code := Main(ctx, []string{"check", "--store", url, "--settled"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("check of a clean store: exit %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "checked 1 versions") || !strings.HasSuffix(out.String(), "ok\n") {
		t.Fatalf("check output %q", out.String())
	}

	db, err := sql.Open("sqlite", strings.TrimPrefix(url, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TRIGGER versions_no_delete`); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := Main(ctx, []string{"check", "--store", url, "-o", "json"}, nil, &out, &errOut); code != 1 {
		t.Fatalf("check of a store without its trigger: exit %d, want 1: %s%s", code, out.String(), errOut.String())
	}
	var rep check.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("json output %q: %v", out.String(), err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Invariant != check.AppendOnly || rep.Problems[0].Row != "table versions" {
		t.Fatalf("problems %+v, want the missing DELETE trigger on versions", rep.Problems)
	}
	if !strings.Contains(errOut.String(), "invariants violated") {
		t.Fatalf("stderr %q", errOut.String())
	}
	if code := Main(ctx, []string{"check", "--store", url, "-o", "yaml"}, nil, &out, &errOut); code != 2 {
		t.Fatalf("bad --output: exit %d, want 2", code)
	}
}
