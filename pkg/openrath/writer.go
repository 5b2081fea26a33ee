package openrath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// Writer writes a persisted transcript that OpenRath can load, the way
// OpenRath's SessionWriter does: it opens <dir>/<id>.jsonl.__partial__ with
// mode 0600 under an exclusive non-blocking flock (a second writer of the
// same id gets [ErrLocked]), writes the header at once, then one line per
// chunk, each flushed to the file as it is written. [Writer.Close] writes
// the trailer, syncs and renames the file to <id>.jsonl atomically;
// [Writer.Abandon] leaves the partial file, which loaders read as an open
// (unclosed) transcript. A Writer is safe for concurrent use.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	partial string
	final   string
	n       int
	done    bool
}

// Create starts the transcript of h.ID in dir (created 0700 if missing).
// h.SchemaVersion 0 means [SchemaVersion]; h.CreatedAt "" means now.
func Create(dir string, h Header) (*Writer, error) {
	if err := checkUUID("id", h.ID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if h.SchemaVersion == 0 {
		h.SchemaVersion = SchemaVersion
	}
	if h.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w: cannot write schema_version %d", ErrSchema, h.SchemaVersion)
	}
	if h.CreatedAt == "" {
		h.CreatedAt = pyISOTime(time.Now())
	} else if _, err := parsePyTime(h.CreatedAt); err != nil {
		return nil, fmt.Errorf("%w: created_at: %w", ErrFormat, err)
	}
	if h.LineageOperator == "" {
		h.LineageOperator = "implicit"
	}
	if h.LineageKind == "" {
		h.LineageKind = "unknown"
	}
	line, err := h.appendPy(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrFormat, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	w := &Writer{
		partial: filepath.Join(dir, h.ID+PartialSuffix),
		final:   filepath.Join(dir, h.ID+FinalSuffix),
	}
	// Not O_TRUNC: truncating before the lock is held would clobber a live
	// writer's file.
	f, err := os.OpenFile(w.partial, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	w.f = f
	if err := f.Chmod(0o600); err != nil {
		return nil, errors.Join(err, w.release())
	}
	if err := f.Truncate(0); err != nil {
		return nil, errors.Join(err, w.release())
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return nil, errors.Join(err, w.release())
	}
	return w, nil
}

// Path returns the file being written (the partial name until Close).
func (w *Writer) Path() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done && w.f == nil && w.final != "" {
		return w.final
	}
	return w.partial
}

// WriteChunk appends the next chunk. Only OpenRath's four kinds (system,
// user, assistant, tool_result) can be written; other kinds are refused
// with [session.ErrInvalidChunk].
func (w *Writer) WriteChunk(c session.Chunk) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return ErrClosed
	}
	if c.IsZero() {
		return fmt.Errorf("%w: zero chunk", session.ErrInvalidChunk)
	}
	line, err := appendPyChunkRecord(nil, w.n, c)
	if err != nil {
		return fmt.Errorf("chunk %d: %w", w.n, err)
	}
	if _, err := w.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("chunk %d: %w", w.n, err)
	}
	w.n++
	return nil
}

// Close writes the trailer (closed now) and publishes the file under its
// final name. Closing twice returns nil.
func (w *Writer) Close(usage *Usage) error { return w.CloseAt(time.Now(), usage) }

// CloseAt is Close with an explicit close time.
func (w *Writer) CloseAt(closedAt time.Time, usage *Usage) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	tr := Trailer{ClosedAt: pyISOTime(closedAt), FinalChunkCount: w.n, CumulativeUsage: usage}
	if _, err := w.f.Write(append(tr.appendPy(nil), '\n')); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(w.partial, w.final); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(w.final)); err == nil {
		_ = d.Sync() // make the rename durable where the platform allows
		d.Close()
	}
	w.done = true
	return w.release()
}

// Abandon stops writing and leaves the partial file in place, as OpenRath
// does when the loop fails. Abandoning a closed Writer returns nil.
func (w *Writer) Abandon() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.done = true
	w.final = ""
	return w.release()
}

func (w *Writer) release() error {
	if w.f == nil {
		return nil
	}
	uerr := unlockFile(w.f)
	cerr := w.f.Close()
	w.f = nil
	if cerr != nil {
		return cerr
	}
	return uerr
}
