// Package hostfs gives the sandbox backends file operations on a workspace
// directory of the worker host, confined to it by [os.Root].
//
// Every path is workspace-relative and slash-separated ("." is the root).
// Absolute paths and paths whose ".." climbs above the root are refused
// lexically; symlinks are followed only while they stay inside the root
// (os.Root enforces this on every call, so a symlink swapped in between a
// check and a use cannot escape either). Refusals wrap
// [sandbox.ErrOutsideWorkspace] and name the path; missing files wrap
// [sandbox.ErrNotFound].
package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rath-run/rath/pkg/sandbox"
)

// FS is a confined view of one workspace directory. Safe for concurrent use.
type FS struct {
	dir  string
	root *os.Root
	// uid and gid own what WriteFile creates when chown is set (a root
	// worker writing for a container's non-root user).
	chown    bool
	uid, gid int
}

// Open opens the workspace directory dir, which must exist.
func Open(dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", abs, err)
	}
	return &FS{dir: abs, root: root}, nil
}

// SetOwner makes WriteFile chown what it creates to uid:gid.
func (f *FS) SetOwner(uid, gid int) { f.chown, f.uid, f.gid = true, uid, gid }

// Dir is the absolute host path of the workspace.
func (f *FS) Dir() string { return f.dir }

// Close releases the root.
func (f *FS) Close() error { return f.root.Close() }

// Clean validates a workspace-relative path and returns it cleaned ("" and
// "." are the root). Absolute paths and paths climbing above the root wrap
// sandbox.ErrOutsideWorkspace.
func Clean(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q: contains a NUL byte", p)
	}
	if p == "" {
		return ".", nil
	}
	if path.IsAbs(p) || filepath.IsAbs(p) || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%w: %q is absolute; paths are relative to the workspace", sandbox.ErrOutsideWorkspace, p)
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q climbs above the workspace root", sandbox.ErrOutsideWorkspace, p)
	}
	return c, nil
}

// HostDir returns the host path of the workspace directory rel, checking
// that it exists, is a directory and resolves inside the workspace. Used
// for a command's working directory.
func (f *FS) HostDir(rel string) (string, error) {
	c, err := Clean(rel)
	if err != nil {
		return "", err
	}
	fi, err := f.root.Stat(c)
	if err != nil {
		return "", f.classify("working directory", c, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("working directory %q: not a directory", c)
	}
	if c == "." {
		return f.dir, nil
	}
	// Resolve symlinks so the command starts where os.Root said it is.
	real, err := filepath.EvalSymlinks(filepath.Join(f.dir, filepath.FromSlash(c)))
	if err != nil {
		return "", fmt.Errorf("working directory %q: %w", c, err)
	}
	if !within(f.dir, real) {
		return "", fmt.Errorf("%w: working directory %q resolves outside it", sandbox.ErrOutsideWorkspace, c)
	}
	return real, nil
}

// ReadFile reads a file. limit > 0 refuses a larger file with
// sandbox.ErrTooLarge; limit <= 0 reads it whole.
func (f *FS) ReadFile(p string, limit int64) ([]byte, error) {
	c, err := Clean(p)
	if err != nil {
		return nil, err
	}
	file, err := f.root.Open(c)
	if err != nil {
		return nil, f.classify("read", c, err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", c, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("read %q: is a directory", c)
	}
	if limit > 0 && fi.Size() > limit {
		return nil, fmt.Errorf("%w: read %q: %d bytes, limit %d", sandbox.ErrTooLarge, c, fi.Size(), limit)
	}
	r := io.Reader(file)
	if limit > 0 {
		r = io.LimitReader(file, limit+1) // the file may grow while read
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", c, err)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: read %q: over %d bytes", sandbox.ErrTooLarge, c, limit)
	}
	return data, nil
}

// WriteFile writes a file, creating parent directories (0o755). perm 0
// means 0o644.
func (f *FS) WriteFile(p string, data []byte, perm fs.FileMode) error {
	c, err := Clean(p)
	if err != nil {
		return err
	}
	if c == "." {
		return fmt.Errorf("write %q: is the workspace root", p)
	}
	if perm == 0 {
		perm = 0o644
	}
	if err := f.mkdirParents(c); err != nil {
		return err
	}
	file, err := f.root.OpenFile(c, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm.Perm())
	if err != nil {
		return f.classify("write", c, err)
	}
	if _, err := file.Write(data); err != nil {
		file.Close()
		return fmt.Errorf("write %q: %w", c, err)
	}
	if f.chown {
		if err := file.Chown(f.uid, f.gid); err != nil {
			file.Close()
			return fmt.Errorf("write %q: chown: %w", c, err)
		}
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("write %q: %w", c, err)
	}
	return nil
}

func (f *FS) mkdirParents(c string) error {
	dir := path.Dir(c)
	if dir == "." {
		return nil
	}
	cur := ""
	for part := range strings.SplitSeq(dir, "/") {
		cur = path.Join(cur, part)
		err := f.root.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			if f.chown {
				if err := f.root.Lchown(cur, f.uid, f.gid); err != nil {
					return fmt.Errorf("mkdir %q: chown: %w", cur, err)
				}
			}
		case errors.Is(err, fs.ErrExist):
			// Existing: os.Root checks it stays inside on the next step.
		default:
			return f.classify("mkdir", cur, err)
		}
	}
	return nil
}

// Stat describes a path, following symlinks that stay inside.
func (f *FS) Stat(p string) (sandbox.FileInfo, error) {
	c, err := Clean(p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := f.root.Stat(c)
	if err != nil {
		return sandbox.FileInfo{}, f.classify("stat", c, err)
	}
	return info(c, fi), nil
}

// List returns a directory's entries sorted by name. Symlinks are listed as
// links, not followed.
func (f *FS) List(p string) ([]sandbox.FileInfo, error) {
	c, err := Clean(p)
	if err != nil {
		return nil, err
	}
	dir, err := f.root.Open(c)
	if err != nil {
		return nil, f.classify("list", c, err)
	}
	defer dir.Close()
	fi, err := dir.Stat()
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", c, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %q: not a directory", c)
	}
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", c, err)
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		ei, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, info(path.Join(c, e.Name()), ei))
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func info(c string, fi fs.FileInfo) sandbox.FileInfo {
	name := path.Base(c)
	return sandbox.FileInfo{
		Name:  name,
		Path:  c,
		IsDir: fi.IsDir(),
		Size:  fi.Size(),
		Mode:  fi.Mode(),
	}
}

// classify turns an os.Root error into the sandbox's: escapes first (os.Root
// does not export its escape error, so the path is re-resolved here), then
// not found.
func (f *FS) classify(op, c string, err error) error {
	if escapes(f.dir, c) {
		return fmt.Errorf("%w: %s %q: a symlink points outside the workspace", sandbox.ErrOutsideWorkspace, op, c)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s %q", sandbox.ErrNotFound, op, c)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the host path would leak the worker's layout
	}
	return fmt.Errorf("%s %q: %w", op, c, err)
}

// escapes reports whether resolving the clean relative path rel under base,
// following symlinks as the kernel would, leaves base. Absolute link targets
// count as escaping (os.Root refuses them).
func escapes(base, rel string) bool {
	parts := strings.Split(rel, "/")
	var cur []string
	for hops := 0; len(parts) > 0; {
		p := parts[0]
		parts = parts[1:]
		switch p {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return true
			}
			cur = cur[:len(cur)-1]
			continue
		}
		full := filepath.Join(base, filepath.Join(cur...), p)
		fi, err := os.Lstat(full)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = append(cur, p)
			continue
		}
		if hops++; hops > 40 {
			return false // a loop: os.Root reports it as such
		}
		target, err := os.Readlink(full)
		if err != nil {
			cur = append(cur, p)
			continue
		}
		if filepath.IsAbs(target) {
			return true
		}
		parts = append(strings.Split(filepath.ToSlash(target), "/"), parts...)
	}
	return false
}

func within(base, p string) bool {
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		realBase = base
	}
	r, err := filepath.Rel(realBase, p)
	return err == nil && r != ".." && !strings.HasPrefix(r, "../")
}
