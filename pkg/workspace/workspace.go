package workspace

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Limits bound a workspace. Zero fields take the defaults.
type Limits struct {
	// MaxTotalBytes bounds the sum of the files' sizes; default 1 GiB.
	MaxTotalBytes int64
	// MaxFiles bounds the number of entries (files, directories and
	// symlinks); default 100,000.
	MaxFiles int
	// MaxFileBytes bounds one file; default 256 MiB.
	MaxFileBytes int64
	// MaxManifestBytes bounds an encoded manifest; default 32 MiB.
	MaxManifestBytes int64
}

// Defaults for [Limits] and [Config].
const (
	DefaultMaxTotalBytes    = 1 << 30
	DefaultMaxFiles         = 100_000
	DefaultMaxFileBytes     = 256 << 20
	DefaultMaxManifestBytes = 32 << 20
	DefaultConcurrency      = 8
	DefaultCachedManifests  = 64
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	l.MaxTotalBytes = cmp.Or(l.MaxTotalBytes, DefaultMaxTotalBytes)
	l.MaxFiles = cmp.Or(l.MaxFiles, DefaultMaxFiles)
	l.MaxFileBytes = cmp.Or(l.MaxFileBytes, DefaultMaxFileBytes)
	l.MaxManifestBytes = cmp.Or(l.MaxManifestBytes, DefaultMaxManifestBytes)
	return l
}

func (l Limits) validate() error {
	switch {
	case l.MaxTotalBytes < 0:
		return fmt.Errorf("workspace: Limits.MaxTotalBytes must not be negative, got %d", l.MaxTotalBytes)
	case l.MaxFiles < 0:
		return fmt.Errorf("workspace: Limits.MaxFiles must not be negative, got %d", l.MaxFiles)
	case l.MaxFileBytes < 0:
		return fmt.Errorf("workspace: Limits.MaxFileBytes must not be negative, got %d", l.MaxFileBytes)
	case l.MaxManifestBytes < 0:
		return fmt.Errorf("workspace: Limits.MaxManifestBytes must not be negative, got %d", l.MaxManifestBytes)
	}
	return nil
}

// Config configures a [Snapshotter]. Zero fields take the defaults.
type Config struct {
	Limits Limits
	// Concurrency is how many files are hashed, uploaded or downloaded at
	// once; default 8.
	Concurrency int
	// CachedManifests is how many manifests are kept in memory (they are
	// immutable, so the cache is always correct); default 64.
	CachedManifests int
}

// Snapshotter snapshots and restores workspaces in a [Store]. It is safe for
// concurrent use.
type Snapshotter struct {
	store Store
	cfg   Config
	cache *lru.Cache[string, *Manifest]
}

// New returns a Snapshotter over store.
func New(store Store, cfg Config) (*Snapshotter, error) {
	if store == nil {
		return nil, errors.New("workspace: store is required")
	}
	if err := cfg.Limits.validate(); err != nil {
		return nil, err
	}
	if cfg.Concurrency < 0 || cfg.CachedManifests < 0 {
		return nil, errors.New("workspace: Concurrency and CachedManifests must not be negative")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.CachedManifests = cmp.Or(cfg.CachedManifests, DefaultCachedManifests)
	cache, err := lru.New[string, *Manifest](cfg.CachedManifests)
	if err != nil {
		return nil, fmt.Errorf("workspace: manifest cache: %w", err)
	}
	return &Snapshotter{store: store, cfg: cfg, cache: cache}, nil
}

// Limits returns the effective limits.
func (s *Snapshotter) Limits() Limits { return s.cfg.Limits }

// Result is what [Snapshotter.Snapshot] did.
type Result struct {
	// ID is the snapshot id; "" for an empty workspace.
	ID       string
	Manifest *Manifest
	// ObjectsWritten and BytesWritten count what this call stored: zero
	// when the workspace was unchanged or already stored.
	ObjectsWritten int
	BytesWritten   int64
	// Skipped lists paths of special files (sockets, pipes, devices) that
	// were not recorded.
	Skipped []string
}

func blobName(sum string) string    { return "blob/" + sum }
func manifestName(id string) string { return "manifest/" + id }

// Snapshot records the tree under dir. base is the snapshot dir was
// restored from ("" for none): its blobs are known to be stored, so only
// new content is checked and uploaded, and a tree equal to base writes
// nothing. Symlinks are recorded, not followed.
func (s *Snapshotter) Snapshot(ctx context.Context, dir, base string) (Result, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, fmt.Errorf("workspace: open %s: %w", dir, err)
	}
	defer root.Close()

	m, skipped, err := s.walk(root, dir)
	if err != nil {
		return Result{}, err
	}
	if err := s.hashFiles(ctx, root, m); err != nil {
		return Result{}, err
	}
	res := Result{Manifest: m, Skipped: skipped}
	if len(m.Entries) == 0 {
		return res, nil
	}
	enc, err := m.Encode()
	if err != nil {
		return Result{}, err
	}
	if int64(len(enc)) > s.cfg.Limits.MaxManifestBytes {
		return Result{}, fmt.Errorf("%w: %s: manifest of %d bytes exceeds Limits.MaxManifestBytes = %d",
			ErrTooLarge, dir, len(enc), s.cfg.Limits.MaxManifestBytes)
	}
	res.ID = hashHex(enc)
	if res.ID == base {
		return res, nil
	}
	if _, ok := s.cache.Get(res.ID); ok {
		return res, nil
	}
	ok, err := s.store.Exists(ctx, manifestName(res.ID))
	if err != nil {
		return Result{}, fmt.Errorf("workspace: %w", err)
	}
	if !ok {
		if err := s.upload(ctx, root, m, base, &res); err != nil {
			return Result{}, err
		}
		n, err := s.store.Put(ctx, manifestName(res.ID), bytes.NewReader(enc))
		if err != nil {
			return Result{}, fmt.Errorf("workspace: store manifest: %w", err)
		}
		res.ObjectsWritten++
		res.BytesWritten += n
	}
	s.cache.Add(res.ID, m)
	return res, nil
}

// walk lists the tree under root and checks the limits on what it finds.
func (s *Snapshotter) walk(root *os.Root, dir string) (*Manifest, []string, error) {
	lim := s.cfg.Limits
	m := &Manifest{Version: ManifestVersion}
	var skipped []string
	var total int64
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("workspace: read %s: %w", p, err)
		}
		if p == "." {
			return nil
		}
		if err := ValidPath(p); err != nil {
			return fmt.Errorf("workspace: %s: %w", dir, err)
		}
		if len(m.Entries) >= lim.MaxFiles {
			return fmt.Errorf("%w: %s: more than Limits.MaxFiles = %d entries (files, directories and symlinks)",
				ErrTooLarge, dir, lim.MaxFiles)
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("workspace: stat %s: %w", p, err)
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			m.Entries = append(m.Entries, Entry{Path: p, Type: TypeDir, Mode: Mode(mode.Perm())})
		case mode.IsRegular():
			size := info.Size()
			if size > lim.MaxFileBytes {
				return fmt.Errorf("%w: %s: file %s of %d bytes exceeds Limits.MaxFileBytes = %d",
					ErrTooLarge, dir, p, size, lim.MaxFileBytes)
			}
			if total += size; total > lim.MaxTotalBytes {
				return fmt.Errorf("%w: %s: files total more than Limits.MaxTotalBytes = %d bytes",
					ErrTooLarge, dir, lim.MaxTotalBytes)
			}
			m.Entries = append(m.Entries, Entry{Path: p, Type: TypeFile, Mode: Mode(mode.Perm()), Size: size})
		case mode&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return fmt.Errorf("workspace: readlink %s: %w", p, err)
			}
			e := Entry{Path: p, Type: TypeSymlink, Target: target}
			if err := validEntry(e); err != nil {
				return fmt.Errorf("workspace: %s: %w", dir, err)
			}
			m.Entries = append(m.Entries, e)
		default:
			skipped = append(skipped, p)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// WalkDir visits a directory's children before its later siblings
	// ("a/b" before "a-b"); the manifest is in plain byte order.
	slices.SortFunc(m.Entries, func(a, b Entry) int { return cmp.Compare(a.Path, b.Path) })
	return m, skipped, nil
}

// hashFiles fills in every file's SHA256.
func (s *Snapshotter) hashFiles(ctx context.Context, root *os.Root, m *Manifest) error {
	var idx []int
	for i, e := range m.Entries {
		if e.Type == TypeFile {
			idx = append(idx, i)
		}
	}
	return forEach(ctx, s.cfg.Concurrency, idx, func(_ context.Context, i int) error {
		e := &m.Entries[i]
		sum, err := hashFile(root, e.Path, e.Size, nil)
		if err != nil {
			return err
		}
		e.SHA256 = sum
		return nil
	})
}

// hashFile reads the regular file p, which must be size bytes, copying it
// to w when w is non-nil, and returns its hash.
func hashFile(root *os.Root, p string, size int64, w io.Writer) (string, error) {
	// O_NOFOLLOW: a file swapped for a symlink is refused; O_NONBLOCK: a
	// file swapped for a pipe does not block the open.
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("workspace: open %s: %w", p, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is no longer a regular file", ErrChanged, p)
	}
	h := sha256.New()
	var dst io.Writer = h
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, io.LimitReader(f, size+1))
	if err != nil {
		return "", fmt.Errorf("workspace: read %s: %w", p, err)
	}
	if n != size {
		return "", fmt.Errorf("%w: %s was %d bytes, then %d", ErrChanged, p, size, n)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// upload stores the blobs of m that are neither in base nor already stored.
func (s *Snapshotter) upload(ctx context.Context, root *os.Root, m *Manifest, base string, res *Result) error {
	known := map[string]bool{}
	if base != "" {
		// A base that cannot be read only costs existence checks.
		if bm, err := s.Manifest(ctx, base); err == nil {
			for _, e := range bm.Entries {
				if e.Type == TypeFile {
					known[e.SHA256] = true
				}
			}
		}
	}
	var todo []int
	for i, e := range m.Entries {
		if e.Type == TypeFile && !known[e.SHA256] {
			known[e.SHA256] = true // once per content
			todo = append(todo, i)
		}
	}
	var mu sync.Mutex
	return forEach(ctx, s.cfg.Concurrency, todo, func(ctx context.Context, i int) error {
		e := m.Entries[i]
		name := blobName(e.SHA256)
		ok, err := s.store.Exists(ctx, name)
		if err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
		if ok {
			return nil
		}
		n, err := s.putFile(ctx, root, e, name)
		if err != nil {
			return err
		}
		mu.Lock()
		res.ObjectsWritten++
		res.BytesWritten += n
		mu.Unlock()
		return nil
	})
}

// putFile streams a file into the store under name, verifying on the way
// that it still has the content the manifest records; if not, the object is
// withdrawn.
func (s *Snapshotter) putFile(ctx context.Context, root *os.Root, e Entry, name string) (int64, error) {
	pr, pw := io.Pipe()
	var sum string
	var herr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, herr = hashFile(root, e.Path, e.Size, pw)
		pw.CloseWithError(herr)
	}()
	n, err := s.store.Put(ctx, name, pr)
	_ = pr.CloseWithError(errors.New("workspace: upload ended"))
	<-done
	switch {
	case herr != nil:
		err = herr
	case err != nil:
		err = fmt.Errorf("workspace: store %s: %w", e.Path, err)
	case sum != e.SHA256:
		err = fmt.Errorf("%w: %s", ErrChanged, e.Path)
	}
	if err != nil {
		if derr := s.store.Delete(context.WithoutCancel(ctx), name); derr != nil {
			err = errors.Join(err, derr)
		}
		return 0, err
	}
	return n, nil
}

// Manifest returns the manifest of snapshot id ("" is the empty
// workspace), verified against its id. The result is shared: treat it as
// read-only.
func (s *Snapshotter) Manifest(ctx context.Context, id string) (*Manifest, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	if id == "" {
		return &Manifest{Version: ManifestVersion}, nil
	}
	if m, ok := s.cache.Get(id); ok {
		return m, nil
	}
	rc, err := s.store.Get(ctx, manifestName(id))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%w: snapshot %s", ErrNotFound, id)
		}
		return nil, fmt.Errorf("workspace: snapshot %s: %w", id, err)
	}
	defer rc.Close()
	limit := s.cfg.Limits.MaxManifestBytes
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("workspace: read snapshot %s: %w", id, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: snapshot %s: manifest exceeds Limits.MaxManifestBytes = %d", ErrTooLarge, id, limit)
	}
	if hashHex(b) != id {
		return nil, fmt.Errorf("%w: manifest of snapshot %s", ErrCorrupt, id)
	}
	m, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	s.cache.Add(id, m)
	return m, nil
}

// checkLimits applies the limits to a manifest about to be restored.
func (s *Snapshotter) checkLimits(id string, m *Manifest) error {
	lim := s.cfg.Limits
	if len(m.Entries) > lim.MaxFiles {
		return fmt.Errorf("%w: snapshot %s has %d entries, over Limits.MaxFiles = %d", ErrTooLarge, id, len(m.Entries), lim.MaxFiles)
	}
	var total int64
	for _, e := range m.Entries {
		if e.Size > lim.MaxFileBytes {
			return fmt.Errorf("%w: snapshot %s: file %s of %d bytes exceeds Limits.MaxFileBytes = %d",
				ErrTooLarge, id, e.Path, e.Size, lim.MaxFileBytes)
		}
		if total += e.Size; total > lim.MaxTotalBytes {
			return fmt.Errorf("%w: snapshot %s: files total more than Limits.MaxTotalBytes = %d bytes",
				ErrTooLarge, id, lim.MaxTotalBytes)
		}
	}
	return nil
}

// Restore writes snapshot id into dir, which must be empty or missing (it
// is created, mode 0700). It returns the snapshot's manifest. On error dir
// may hold part of the snapshot; the caller removes it.
func (s *Snapshotter) Restore(ctx context.Context, id, dir string) (*Manifest, error) {
	m, err := s.Manifest(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.checkLimits(id, m); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace: create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: open %s: %w", dir, err)
	}
	defer root.Close()
	if err := checkEmpty(root, dir); err != nil {
		return nil, err
	}

	// Directories first (a parent sorts before its children), then one
	// download per distinct content, then local copies of duplicates, then
	// symlinks, then modes (directories deepest first, so a read-only
	// directory is filled before it is closed).
	first := map[string]string{} // hash → first path
	var fetch, dups []int
	for i, e := range m.Entries {
		switch e.Type {
		case TypeDir:
			if err := root.Mkdir(e.Path, 0o700); err != nil {
				return nil, fmt.Errorf("workspace: restore %s: %w", e.Path, err)
			}
		case TypeFile:
			if _, ok := first[e.SHA256]; ok {
				dups = append(dups, i)
			} else {
				first[e.SHA256] = e.Path
				fetch = append(fetch, i)
			}
		}
	}
	err = forEach(ctx, s.cfg.Concurrency, fetch, func(ctx context.Context, i int) error {
		return s.fetchFile(ctx, root, m.Entries[i])
	})
	if err != nil {
		return nil, err
	}
	for _, i := range dups {
		e := m.Entries[i]
		if err := copyFile(root, first[e.SHA256], e); err != nil {
			return nil, err
		}
	}
	for _, e := range m.Entries {
		if e.Type == TypeSymlink {
			if err := root.Symlink(e.Target, e.Path); err != nil {
				return nil, fmt.Errorf("workspace: restore symlink %s: %w", e.Path, err)
			}
		}
	}
	for i := len(m.Entries) - 1; i >= 0; i-- {
		e := m.Entries[i]
		if e.Type == TypeSymlink {
			continue
		}
		if err := root.Chmod(e.Path, fs.FileMode(e.Mode)); err != nil {
			return nil, fmt.Errorf("workspace: restore mode of %s: %w", e.Path, err)
		}
	}
	return m, nil
}

func checkEmpty(root *os.Root, dir string) error {
	f, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("workspace: open %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("workspace: read %s: %w", dir, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %s holds %q", ErrNotEmpty, dir, names[0])
	}
	return nil
}

// fetchFile downloads e's blob into a new file, verifying size and hash.
func (s *Snapshotter) fetchFile(ctx context.Context, root *os.Root, e Entry) error {
	rc, err := s.store.Get(ctx, blobName(e.SHA256))
	if err != nil {
		return fmt.Errorf("workspace: restore %s: %w", e.Path, err)
	}
	defer rc.Close()
	return writeVerified(root, e, rc)
}

func copyFile(root *os.Root, from string, e Entry) error {
	src, err := root.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("workspace: restore %s: %w", e.Path, err)
	}
	defer src.Close()
	return writeVerified(root, e, src)
}

// writeVerified creates e.Path exclusively (never through a symlink) and
// fills it from r, which must hold exactly e's content.
func writeVerified(root *os.Root, e Entry, r io.Reader) error {
	f, err := root.OpenFile(e.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("workspace: restore %s: %w", e.Path, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, e.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("workspace: restore %s: %w", e.Path, err)
	}
	if n != e.Size || !sumIs(h, e.SHA256) {
		return fmt.Errorf("%w: %s (blob %s, %d bytes, want %d)", ErrCorrupt, e.Path, e.SHA256, n, e.Size)
	}
	return nil
}

func sumIs(h hash.Hash, want string) bool { return hex.EncodeToString(h.Sum(nil)) == want }

// forEach runs fn for every item with at most n at once; the first error
// cancels the rest and is returned.
func forEach[T any](ctx context.Context, n int, items []T, fn func(context.Context, T) error) error {
	if len(items) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan T)
	var wg sync.WaitGroup
	for range min(n, len(items)) {
		wg.Go(func() {
			for it := range work {
				if ctx.Err() != nil {
					continue
				}
				if err := fn(ctx, it); err != nil {
					cancel(err)
				}
			}
		})
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		work <- it
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}
