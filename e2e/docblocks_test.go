package e2e

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every command and SQL block of README.md and docs/*.md is run by a test,
// or says why it cannot be. A block (fenced as sh, bash, console, shell,
// sql or sqlite) is accounted for by the line just before its fence:
//
//	<!-- docs-test: run by TestA, TestB -->        the tests that run it
//	<!-- docs-test: not run: REASON -->           why no offline test can
//
// SQL blocks that start with "-- check: NAME" in the two lineage guides
// need no annotation: TestLineageGuide (both stores, and the sqlite3 shell)
// and TestBlameQuery run every one of them.
//
// A "run by" block is, besides, run as written by
// TestDocBlocksRunLiterally (docliteral_test.go) unless its notLiteral
// list names it with the reason; the tests the annotation names then run
// an equivalent.
var (
	docFence      = regexp.MustCompile("^```(sh|bash|console|shell|sql|sqlite)\\s*$")
	docAnnotation = regexp.MustCompile(`^<!-- docs-test: (run by (.+?)|not run: (.+?)) -->$`)
	docTestName   = regexp.MustCompile(`^(Test|Fuzz)[A-Za-z0-9_]+$`)
	checkedGuides = map[string]string{"lineage-sql.md": "TestLineageGuide", "lineage.md": "TestBlameQuery"}
)

// TestEveryDocBlockIsRun fails on a command or SQL block of the docs that
// no test runs and no annotation excuses, and on an annotation naming a
// test that does not exist.
func TestEveryDocBlockIsRun(t *testing.T) {
	t.Parallel()
	root := repoPath(t, ".")
	tests := testFuncs(t, root)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		inFence := false
		for i, line := range lines {
			if strings.HasPrefix(line, "```") {
				if inFence {
					inFence = false
					continue
				}
				inFence = true
				m := docFence.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				blocks++
				where := filepath.Base(f) + ":" + strconv.Itoa(i+1)
				if (m[1] == "sql" || m[1] == "sqlite") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "-- check: ") {
					if name, ok := checkedGuides[filepath.Base(f)]; ok && tests[name] {
						continue
					}
					t.Errorf("%s: a checked query outside the lineage guides: no test runs it", where)
					continue
				}
				prev := ""
				if i > 0 {
					prev = strings.TrimSpace(lines[i-1])
				}
				a := docAnnotation.FindStringSubmatch(prev)
				switch {
				case a == nil:
					t.Errorf("%s: a %s block that no test runs: run it from a test and name the test (<!-- docs-test: run by TestX -->), or say why it cannot run offline (<!-- docs-test: not run: REASON -->) on the line before the fence", where, m[1])
				case a[3] != "":
					if len(strings.Fields(a[3])) < 3 {
						t.Errorf("%s: %q is no reason", where, a[3])
					}
				default:
					for _, name := range strings.Split(a[2], ",") {
						name = strings.TrimSpace(name)
						if !docTestName.MatchString(name) || !tests[name] {
							t.Errorf("%s: the block is said to be run by %q, which is no test in the repository", where, name)
						}
					}
				}
			}
		}
	}
	if blocks < 40 {
		t.Fatalf("found only %d command and SQL blocks: is the fence pattern right?", blocks)
	}
}

// testFuncs returns the names of the test and fuzz functions of the
// repository's _test.go files.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`^func ((Test|Fuzz)[A-Za-z0-9_]+)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || n == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if m := decl.FindStringSubmatch(sc.Text()); m != nil {
				out[m[1]] = true
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
