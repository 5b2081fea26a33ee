package workspace_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/bus"
	"github.com/rath-run/rath/internal/bus/bustest"
	"github.com/rath-run/rath/pkg/workspace"
)

// backend is a store under test plus a way to count what it holds.
type backend struct {
	name  string
	store workspace.Store
	// stored returns the bytes the store holds (JetStream: the object
	// store stream's bytes, metadata included).
	stored func(t *testing.T) uint64
}

func jetStreamBackend(t *testing.T) backend {
	t.Helper()
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true})
	return backend{
		name:  "jetstream",
		store: workspace.JetStream(b.JetStream(), b.Workspaces()),
		stored: func(t *testing.T) uint64 {
			t.Helper()
			return streamBytes(t, b)
		},
	}
}

func streamBytes(t testing.TB, b *bus.Bus) uint64 {
	t.Helper()
	s, err := b.JetStream().Stream(context.Background(), "OBJ_"+bus.WorkspacesBucket)
	if err != nil {
		t.Fatalf("object store stream: %v", err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatalf("object store stream info: %v", err)
	}
	return info.State.Bytes
}

func memoryBackend(*testing.T) backend {
	m := &workspace.MemoryStore{}
	return backend{name: "memory", store: m, stored: func(*testing.T) uint64 {
		_, n := m.Written()
		return uint64(n)
	}}
}

// eachBackend runs fn against the embedded JetStream object store and the
// in-memory store.
func eachBackend(t *testing.T, fn func(t *testing.T, be backend)) {
	t.Helper()
	for _, mk := range []func(*testing.T) backend{jetStreamBackend, memoryBackend} {
		be := mk(t)
		t.Run(be.name, func(t *testing.T) { fn(t, be) })
	}
}

func newSnapshotter(t testing.TB, st workspace.Store, cfg workspace.Config) *workspace.Snapshotter {
	t.Helper()
	s, err := workspace.New(st, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// writeTree creates files (path → content) under dir; a content starting
// with "->" makes a symlink to the rest.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		// Modes independent of the umask.
		for d := filepath.Dir(full); d != filepath.Clean(dir); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree describes dir: path → "dir 0755", "file 0644 <content>" or
// "symlink <target>".
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink " + target
		case info.IsDir():
			out[rel] = "dir " + info.Mode().Perm().String()
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + info.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok {
			t.Errorf("%s: missing, want %q", p, w)
		} else if g != w {
			t.Errorf("%s: got %q, want %q", p, g, w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected %q", p, g)
		}
	}
}

var sample = map[string]string{
	"README.md":          "# hello\n",
	"src/main.go":        "package main\n",
	"src/copy.go":        "package main\n", // same content: one blob
	"src/a-b.txt":        "sorts between src/a and src/a/…",
	"src/a/deep/x.txt":   "deep",
	"empty.txt":          "",
	"link-to-readme":     "->README.md",
	"link-outside":       "->/etc/passwd", // recorded, never followed
	"dangling":           "->nowhere",
	"dir with space/f 1": "spaces",
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		c := ctx(t)
		s := newSnapshotter(t, be.store, workspace.Config{})
		src := t.TempDir()
		writeTree(t, src, sample)
		if err := os.Mkdir(filepath.Join(src, "empty-dir"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(src, "src/main.go"), 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := s.Snapshot(c, src, "")
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if err := workspace.ValidID(res.ID); err != nil || res.ID == "" {
			t.Fatalf("ID %q: %v", res.ID, err)
		}
		// 6 distinct contents (main.go and copy.go share one) + the manifest.
		if res.ObjectsWritten != 7 {
			t.Errorf("ObjectsWritten = %d, want 7 (6 distinct blobs + manifest)", res.ObjectsWritten)
		}
		e, ok := res.Manifest.Lookup("link-outside")
		if !ok || e.Type != workspace.TypeSymlink || e.Target != "/etc/passwd" {
			t.Errorf("link-outside recorded as %+v, want a symlink to /etc/passwd", e)
		}

		dst := filepath.Join(t.TempDir(), "restored")
		m, err := s.Restore(c, res.ID, dst)
		if err != nil {
			t.Fatalf("Restore: %v", err)
		}
		if len(m.Entries) != len(res.Manifest.Entries) {
			t.Errorf("restored manifest has %d entries, want %d", len(m.Entries), len(res.Manifest.Entries))
		}
		equalTrees(t, tree(t, dst), tree(t, src))

		// A fresh snapshotter (another worker: no cache) restores the same.
		other := newSnapshotter(t, be.store, workspace.Config{})
		dst2 := t.TempDir()
		if _, err := other.Restore(c, res.ID, dst2); err != nil {
			t.Fatalf("Restore on a second snapshotter: %v", err)
		}
		equalTrees(t, tree(t, dst2), tree(t, src))
	})
}

func TestUnchangedWorkspaceWritesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		c := ctx(t)
		s := newSnapshotter(t, be.store, workspace.Config{})
		src := t.TempDir()
		writeTree(t, src, sample)
		first, err := s.Snapshot(c, src, "")
		if err != nil {
			t.Fatal(err)
		}
		before := be.stored(t)

		// Same tree, same snapshotter, no base.
		again, err := s.Snapshot(c, src, "")
		if err != nil {
			t.Fatal(err)
		}
		// Restored elsewhere and snapshotted by a new snapshotter with the
		// snapshot as base, and without one.
		dst := t.TempDir()
		other := newSnapshotter(t, be.store, workspace.Config{})
		if _, err := other.Restore(c, first.ID, dst); err != nil {
			t.Fatal(err)
		}
		withBase, err := other.Snapshot(c, dst, first.ID)
		if err != nil {
			t.Fatal(err)
		}
		third := newSnapshotter(t, be.store, workspace.Config{})
		noBase, err := third.Snapshot(c, dst, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []workspace.Result{again, withBase, noBase} {
			if r.ID != first.ID {
				t.Errorf("ID = %s, want %s", r.ID, first.ID)
			}
			if r.ObjectsWritten != 0 || r.BytesWritten != 0 {
				t.Errorf("wrote %d objects, %d bytes; want none", r.ObjectsWritten, r.BytesWritten)
			}
		}
		if after := be.stored(t); after != before {
			t.Errorf("store grew from %d to %d bytes for unchanged snapshots", before, after)
		}
	})
}

func TestChangeWritesOnlyNewContent(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		c := ctx(t)
		s := newSnapshotter(t, be.store, workspace.Config{})
		src := t.TempDir()
		writeTree(t, src, map[string]string{"a.txt": "a", "b.txt": "b", "big.bin": strings.Repeat("x", 1<<20)})
		base, err := s.Snapshot(c, src, "")
		if err != nil {
			t.Fatal(err)
		}
		writeTree(t, src, map[string]string{"a.txt": "a2", "c.txt": "b"}) // c.txt reuses b's blob
		res, err := s.Snapshot(c, src, base.ID)
		if err != nil {
			t.Fatal(err)
		}
		if res.ID == base.ID {
			t.Fatal("a changed workspace kept its id")
		}
		if res.ObjectsWritten != 2 {
			t.Errorf("ObjectsWritten = %d, want 2 (a.txt's new blob + manifest)", res.ObjectsWritten)
		}
		if res.BytesWritten > 4<<10 {
			t.Errorf("BytesWritten = %d; the 1 MiB file was uploaded again", res.BytesWritten)
		}
		changes := workspace.Diff(base.Manifest, res.Manifest)
		var got []string
		for _, ch := range changes {
			got = append(got, string(ch.Kind)+" "+ch.Path)
		}
		want := []string{"changed a.txt", "added c.txt"}
		if !slices.Equal(got, want) {
			t.Errorf("Diff = %v, want %v", got, want)
		}
	})
}

func TestForkedWorkspacesChangeIndependently(t *testing.T) {
	be := jetStreamBackend(t)
	c := ctx(t)
	w1 := newSnapshotter(t, be.store, workspace.Config{})
	w2 := newSnapshotter(t, be.store, workspace.Config{})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"shared.txt": "v1", "notes/log.txt": "start\n"})
	parent, err := w1.Snapshot(c, src, "")
	if err != nil {
		t.Fatal(err)
	}
	// Both branches of a fork start from the parent's id, on two workers.
	branchA, branchB := t.TempDir(), t.TempDir()
	if _, err := w1.Restore(c, parent.ID, branchA); err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Restore(c, parent.ID, branchB); err != nil {
		t.Fatal(err)
	}
	writeTree(t, branchA, map[string]string{"shared.txt": "from A", "a-only.txt": "A"})
	if err := os.Remove(filepath.Join(branchB, "notes/log.txt")); err != nil {
		t.Fatal(err)
	}
	ra, err := w1.Snapshot(c, branchA, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := w2.Snapshot(c, branchB, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ra.ID == rb.ID || ra.ID == parent.ID || rb.ID == parent.ID {
		t.Fatalf("ids not distinct: parent %s, A %s, B %s", parent.ID, ra.ID, rb.ID)
	}
	for _, tc := range []struct {
		id   string
		want map[string]string
	}{
		{parent.ID, map[string]string{"shared.txt": "file -rw-r--r-- v1", "notes": "dir -rwxr-xr-x", "notes/log.txt": "file -rw-r--r-- start\n"}},
		{ra.ID, map[string]string{"shared.txt": "file -rw-r--r-- from A", "a-only.txt": "file -rw-r--r-- A", "notes": "dir -rwxr-xr-x", "notes/log.txt": "file -rw-r--r-- start\n"}},
		{rb.ID, map[string]string{"shared.txt": "file -rw-r--r-- v1", "notes": "dir -rwxr-xr-x"}},
	} {
		dir := t.TempDir()
		if _, err := newSnapshotter(t, be.store, workspace.Config{}).Restore(c, tc.id, dir); err != nil {
			t.Fatal(err)
		}
		equalTrees(t, tree(t, dir), tc.want)
	}
}

func TestEmptyWorkspace(t *testing.T) {
	m := &workspace.MemoryStore{}
	s := newSnapshotter(t, m, workspace.Config{})
	c := ctx(t)
	res, err := s.Snapshot(c, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "" || res.ObjectsWritten != 0 {
		t.Errorf("empty workspace: ID %q, %d objects written; want \"\" and none", res.ID, res.ObjectsWritten)
	}
	if n, _ := m.Written(); n != 0 {
		t.Errorf("store holds %d objects", n)
	}
	dst := filepath.Join(t.TempDir(), "new")
	got, err := s.Restore(c, "", dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 0 || len(tree(t, dst)) != 0 {
		t.Errorf("restore of \"\" produced %v", tree(t, dst))
	}
}

func TestRestoreRefusesNonEmptyDir(t *testing.T) {
	s := newSnapshotter(t, &workspace.MemoryStore{}, workspace.Config{})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"keep.txt": "x"})
	_, err := s.Restore(ctx(t), "", dir)
	if !errors.Is(err, workspace.ErrNotEmpty) || !strings.Contains(err.Error(), "keep.txt") {
		t.Fatalf("Restore into a non-empty dir: %v, want ErrNotEmpty naming keep.txt", err)
	}
}

func TestRestoreMissingSnapshot(t *testing.T) {
	eachBackend(t, func(t *testing.T, be backend) {
		s := newSnapshotter(t, be.store, workspace.Config{})
		id := strings.Repeat("ab", 32)
		_, err := s.Restore(ctx(t), id, t.TempDir())
		if !errors.Is(err, workspace.ErrNotFound) || !strings.Contains(err.Error(), id) {
			t.Fatalf("Restore of a missing snapshot: %v, want ErrNotFound naming it", err)
		}
		if _, err := s.Restore(ctx(t), "../../etc", t.TempDir()); !errors.Is(err, workspace.ErrInvalidManifest) {
			t.Fatalf("Restore of a malformed id: %v, want ErrInvalidManifest", err)
		}
	})
}

func TestLimits(t *testing.T) {
	c := ctx(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a": "12345", "b": "12345", "d/c": "1"})
	st := &workspace.MemoryStore{}
	big := newSnapshotter(t, st, workspace.Config{})
	res, err := big.Snapshot(c, src, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lim  workspace.Limits
		name string
	}{
		{workspace.Limits{MaxFiles: 3}, "Limits.MaxFiles = 3"},
		{workspace.Limits{MaxFileBytes: 4}, "Limits.MaxFileBytes = 4"},
		{workspace.Limits{MaxTotalBytes: 10}, "Limits.MaxTotalBytes = 10"},
		{workspace.Limits{MaxManifestBytes: 100}, "Limits.MaxManifestBytes = 100"},
	} {
		s := newSnapshotter(t, st, workspace.Config{Limits: tc.lim})
		_, err := s.Snapshot(c, src, "")
		if !errors.Is(err, workspace.ErrTooLarge) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Snapshot with %+v: %v; want ErrTooLarge naming %q", tc.lim, err, tc.name)
		}
		dst := t.TempDir()
		_, err = s.Restore(c, res.ID, dst)
		if !errors.Is(err, workspace.ErrTooLarge) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Restore with %+v: %v; want ErrTooLarge naming %q", tc.lim, err, tc.name)
		}
		if got := tree(t, dst); len(got) != 0 {
			t.Errorf("Restore past a limit wrote %v", got)
		}
	}
	if _, err := workspace.New(st, workspace.Config{Limits: workspace.Limits{MaxFiles: -1}}); err == nil ||
		!strings.Contains(err.Error(), "Limits.MaxFiles") {
		t.Errorf("negative limit: %v, want an error naming Limits.MaxFiles", err)
	}
}

func TestSnapshotSkipsSpecialFiles(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"f": "x"})
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	res, err := newSnapshotter(t, &workspace.MemoryStore{}, workspace.Config{}).Snapshot(ctx(t), src, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Skipped, []string{"pipe"}) {
		t.Errorf("Skipped = %v, want [pipe]", res.Skipped)
	}
	if _, ok := res.Manifest.Lookup("pipe"); ok {
		t.Error("a pipe was recorded")
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// putManifest stores raw manifest bytes under their hash, as a hostile or
// buggy writer could, and returns the id.
func putManifest(t *testing.T, st workspace.Store, raw string) string {
	t.Helper()
	id := sha(raw)
	if _, err := st.Put(context.Background(), "manifest/"+id, strings.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestRestoreRefusesHostileManifests(t *testing.T) {
	st := &workspace.MemoryStore{}
	s := newSnapshotter(t, st, workspace.Config{})
	if _, err := st.Put(context.Background(), "blob/"+sha("pwned"), strings.NewReader("pwned")); err != nil {
		t.Fatal(err)
	}
	file := func(p string) string {
		return `{"path":"` + p + `","type":"file","mode":"0644","size":5,"sha256":"` + sha("pwned") + `"}`
	}
	outside := t.TempDir()
	for name, raw := range map[string]string{
		"dotdot":        `{"version":1,"entries":[` + file("../escape") + `]}`,
		"absolute":      `{"version":1,"entries":[` + file(outside+"/abs") + `]}`,
		"inner dotdot":  `{"version":1,"entries":[{"path":"d","type":"dir","mode":"0755"},` + file("d/../../escape") + `]}`,
		"under symlink": `{"version":1,"entries":[{"path":"l","type":"symlink","target":"` + outside + `"},` + file("l/escape") + `]}`,
		"no parent":     `{"version":1,"entries":[` + file("nodir/escape") + `]}`,
		"duplicate":     `{"version":1,"entries":[` + file("x") + `,` + file("x") + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			id := putManifest(t, st, raw)
			dst := t.TempDir()
			_, err := s.Restore(ctx(t), id, dst)
			if !errors.Is(err, workspace.ErrInvalidManifest) {
				t.Fatalf("Restore: %v, want ErrInvalidManifest", err)
			}
			if got := tree(t, dst); len(got) != 0 {
				t.Errorf("wrote %v", got)
			}
			if got := tree(t, outside); len(got) != 0 {
				t.Errorf("wrote outside the workspace: %v", got)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dst), "escape")); err == nil {
				t.Error("wrote next to the workspace")
			}
		})
	}
}

func TestRestoreVerifiesContent(t *testing.T) {
	c := ctx(t)
	st := &workspace.MemoryStore{}
	s := newSnapshotter(t, st, workspace.Config{})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"f.txt": "the real content"})
	res, err := s.Snapshot(c, src, "")
	if err != nil {
		t.Fatal(err)
	}
	// Tamper with the blob: same size, other bytes.
	if _, err := st.Put(c, "blob/"+sha("the real content"), strings.NewReader("the fake content")); err != nil {
		t.Fatal(err)
	}
	_, err = newSnapshotter(t, st, workspace.Config{}).Restore(c, res.ID, t.TempDir())
	if !errors.Is(err, workspace.ErrCorrupt) || !strings.Contains(err.Error(), "f.txt") {
		t.Fatalf("Restore of a tampered blob: %v, want ErrCorrupt naming f.txt", err)
	}
	// Tamper with the manifest.
	if _, err := st.Put(c, "manifest/"+res.ID, strings.NewReader(`{"version":1,"entries":[]}`)); err != nil {
		t.Fatal(err)
	}
	_, err = newSnapshotter(t, st, workspace.Config{}).Restore(c, res.ID, t.TempDir())
	if !errors.Is(err, workspace.ErrCorrupt) {
		t.Fatalf("Restore of a tampered manifest: %v, want ErrCorrupt", err)
	}
}

// racingStore rewrites a workspace file when its upload starts, as a
// process still running in the sandbox could.
type racingStore struct {
	workspace.MemoryStore
	file    string
	deleted []string
}

func (r *racingStore) Put(ctx context.Context, name string, rd io.Reader) (int64, error) {
	if strings.HasPrefix(name, "blob/") {
		if err := os.WriteFile(r.file, []byte("CHANGED"), 0o644); err != nil {
			return 0, err
		}
	}
	return r.MemoryStore.Put(ctx, name, rd)
}

func (r *racingStore) Delete(ctx context.Context, name string) error {
	r.deleted = append(r.deleted, name)
	return r.MemoryStore.Delete(ctx, name)
}

func TestSnapshotDetectsConcurrentChange(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"f.txt": "original"})
	st := &racingStore{file: filepath.Join(src, "f.txt")}
	_, err := newSnapshotter(t, st, workspace.Config{}).Snapshot(ctx(t), src, "")
	if !errors.Is(err, workspace.ErrChanged) || !strings.Contains(err.Error(), "f.txt") {
		t.Fatalf("Snapshot: %v, want ErrChanged naming f.txt", err)
	}
	if len(st.deleted) != 1 || st.deleted[0] != "blob/"+sha("original") {
		t.Errorf("deleted %v, want the withdrawn blob", st.deleted)
	}
	for _, n := range st.Names() {
		if strings.HasPrefix(n, "manifest/") || n == "blob/"+sha("original") {
			t.Errorf("store kept %s after a failed snapshot", n)
		}
	}
}

func TestDiff(t *testing.T) {
	mk := func(es ...workspace.Entry) *workspace.Manifest {
		return &workspace.Manifest{Version: 1, Entries: es}
	}
	f := func(p, c string) workspace.Entry {
		return workspace.Entry{Path: p, Type: workspace.TypeFile, Mode: 0o644, Size: int64(len(c)), SHA256: sha(c)}
	}
	a := mk(f("a", "1"), f("b", "2"), f("c", "3"), workspace.Entry{Path: "l", Type: workspace.TypeSymlink, Target: "a"})
	b := mk(f("b", "2"), f("c", "33"), f("d", "4"), workspace.Entry{Path: "l", Type: workspace.TypeSymlink, Target: "b"})
	var got []string
	for _, ch := range workspace.Diff(a, b) {
		got = append(got, string(ch.Kind)+" "+ch.Path)
	}
	want := []string{"removed a", "changed c", "added d", "changed l"}
	if !slices.Equal(got, want) {
		t.Errorf("Diff = %v, want %v", got, want)
	}
	if d := workspace.Diff(a, a); len(d) != 0 {
		t.Errorf("Diff(a, a) = %v", d)
	}
	if d := workspace.Diff(nil, a); len(d) != 4 || d[0].Kind != workspace.Added {
		t.Errorf("Diff(nil, a) = %v", d)
	}
	chmod := f("b", "2")
	chmod.Mode = 0o755
	if d := workspace.Diff(a, mk(f("a", "1"), chmod, f("c", "3"), a.Entries[3])); len(d) != 1 || d[0].Path != "b" {
		t.Errorf("a mode change: %v", d)
	}
}

func TestManifestDeterministic(t *testing.T) {
	c := ctx(t)
	st := &workspace.MemoryStore{}
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, sample)
	writeTree(t, b, sample)
	ra, err := newSnapshotter(t, st, workspace.Config{}).Snapshot(c, a, "")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := newSnapshotter(t, st, workspace.Config{Concurrency: 1}).Snapshot(c, b, "")
	if err != nil {
		t.Fatal(err)
	}
	if ra.ID != rb.ID {
		t.Fatalf("equal trees snapshot to %s and %s", ra.ID, rb.ID)
	}
	enc, err := ra.Manifest.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if sha(string(enc)) != ra.ID {
		t.Error("ID is not the hash of the encoded manifest")
	}
	if !bytes.Contains(enc, []byte(`"path":"src/a-b.txt"`)) || bytes.Index(enc, []byte(`"src/a-b.txt"`)) > bytes.Index(enc, []byte(`"src/a/deep"`)) {
		t.Errorf("manifest is not in byte order: %s", enc)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	n := min(len(p), f.n)
	f.n -= n
	return n, nil
}

// TestJetStreamStoreFormat: what the adapter writes is a regular object
// store object (multi-chunk, empty, replaced), read back by the object
// store API with its digest check; a failed put leaves nothing behind.
func TestJetStreamStoreFormat(t *testing.T) {
	b, _, _ := bustest.NewWith(t, bustest.Options{InProcess: true})
	st := workspace.JetStream(b.JetStream(), b.Workspaces())
	c := ctx(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16+7) // 2.x chunks
	for name, data := range map[string][]byte{"blob/big": big, "blob/empty": {}} {
		n, err := st.Put(c, name, bytes.NewReader(data))
		if err != nil || n != int64(len(data)) {
			t.Fatalf("Put %s: %d, %v", name, n, err)
		}
		got, err := b.Workspaces().GetBytes(c, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetBytes %s: %d bytes, %v", name, len(got), err)
		}
		info, err := b.Workspaces().GetInfo(c, name)
		if err != nil || info.Size != uint64(len(data)) || info.Digest == "" {
			t.Fatalf("GetInfo %s: %+v, %v", name, info, err)
		}
	}
	if _, err := st.Put(c, "blob/big", strings.NewReader("replaced")); err != nil {
		t.Fatal(err)
	}
	rc, err := st.Get(c, "blob/big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || string(got) != "replaced" {
		t.Fatalf("replaced object reads %q, %v", got, err)
	}

	before := streamBytes(t, b)
	if _, err := st.Put(c, "blob/broken", &failingReader{n: 200 << 10}); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Put from a failing reader: %v", err)
	}
	if ok, err := st.Exists(c, "blob/broken"); ok || err != nil {
		t.Errorf("a failed put is visible: %v %v", ok, err)
	}
	if after := streamBytes(t, b); after != before {
		t.Errorf("a failed put left %d bytes of chunks", after-before)
	}
	if err := st.Delete(c, "blob/big"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.Exists(c, "blob/big"); ok {
		t.Error("deleted object still exists")
	}
	if _, err := st.Get(c, "blob/big"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("Get of a deleted object: %v, want ErrNotFound", err)
	}
	if err := st.Delete(c, "blob/never"); err != nil {
		t.Errorf("Delete of a missing object: %v", err)
	}
}
