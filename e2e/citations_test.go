package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideDesign matches a citation of the design document that lived
// outside the repository (the word DESIGN, optionally ".md", then "§N").
// The design is
// docs/architecture.md; cite its sections as "docs/architecture.md §N". The
// pattern is built from parts so that this file does not match itself.
var outsideDesign = regexp.MustCompile(`\b` + "DES" + `IGN(\.md)?\s*§`)

// TestNoCitationOutsideTheRepo fails on any source, script or doc file that
// cites a design section outside the repository (CHANGELOG.md is history
// and keeps the words it was written with), and checks that every
// "docs/architecture.md §N" citation names a section the document has.
func TestNoCitationOutsideTheRepo(t *testing.T) {
	t.Parallel()
	root := repoPath(t, ".")
	arch, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("the design document: %v", err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(string(arch), -1) {
		sections[m[1]] = true
	}
	if len(sections) == 0 {
		t.Fatal("docs/architecture.md has no numbered sections (\"## N. Title\")")
	}
	cite := regexp.MustCompile(`architecture\.md §(\d+)`)
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", ".rath":
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "CHANGELOG.md" {
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sql", ".sh", ".yaml", ".yml", ".json", ".js", ".html":
		default:
			if d.Name() != "Makefile" && d.Name() != "Dockerfile" {
				return nil
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(raw), "\n") {
			if outsideDesign.MatchString(line) {
				t.Errorf("%s:%d cites a design document outside the repository: %q (cite docs/architecture.md §N)", rel, i+1, strings.TrimSpace(line))
			}
			for _, m := range cite.FindAllStringSubmatch(line, -1) {
				if !sections[m[1]] {
					t.Errorf("%s:%d cites docs/architecture.md §%s, which has no such section", rel, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files under %s: is this the repository?", checked, root)
	}
}
