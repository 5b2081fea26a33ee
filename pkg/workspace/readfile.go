package workspace

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
)

// ReadFile returns the content of the regular file at path p in snapshot
// id, verified against the manifest's size and hash. A path the snapshot
// does not hold, or that names a directory or symlink, is [ErrNotFound]; a
// file larger than max bytes is [ErrTooLarge] (nothing is read).
func (s *Snapshotter) ReadFile(ctx context.Context, id, p string, max int64) ([]byte, Entry, error) {
	if err := ValidPath(p); err != nil {
		return nil, Entry{}, err
	}
	m, err := s.Manifest(ctx, id)
	if err != nil {
		return nil, Entry{}, err
	}
	e, ok := m.Lookup(p)
	if !ok {
		return nil, Entry{}, fmt.Errorf("%w: %s in snapshot %s", ErrNotFound, p, id)
	}
	if e.Type != TypeFile {
		return nil, e, fmt.Errorf("%w: %s in snapshot %s is a %s, not a file", ErrNotFound, p, id, e.Type)
	}
	if e.Size > max {
		return nil, e, fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrTooLarge, p, e.Size, max)
	}
	rc, err := s.store.Get(ctx, blobName(e.SHA256))
	if err != nil {
		return nil, e, fmt.Errorf("workspace: read %s: %w", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, e.Size+1))
	if err != nil {
		return nil, e, fmt.Errorf("workspace: read %s: %w", p, err)
	}
	h := sha256.New()
	h.Write(b)
	if int64(len(b)) != e.Size || !sumIs(h, e.SHA256) {
		return nil, e, fmt.Errorf("%w: %s (blob %s, %d bytes, want %d)", ErrCorrupt, p, e.SHA256, len(b), e.Size)
	}
	return b, e, nil
}
