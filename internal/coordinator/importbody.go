package coordinator

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
)

// errImportBody marks an import body that could not be read whole: the
// client stopped sending, closed the connection, or sent a malformed
// chunked body.
var errImportBody = errors.New("import body cut short")

// spooledImport is an import body read whole into a temporary file,
// positioned at its start.
type spooledImport struct {
	*os.File
	size int64
}

// Size returns the body's length in bytes.
func (s *spooledImport) Size() int64 { return s.size }

// readImport waits for one of MaxConcurrentImports slots and reads the
// request body, at most MaxImportBytes, into a temporary file. The import
// then runs from the file, so its transaction never waits on the client:
// a slow or stalled upload holds a slot and a file, never a database
// connection or (on SQLite) the write lock. release frees the slot and
// removes the file.
func (c *Coordinator) readImport(w http.ResponseWriter, r *http.Request) (*spooledImport, func(), error) {
	select {
	case c.imports <- struct{}{}:
	case <-r.Context().Done():
		return nil, nil, r.Context().Err()
	}
	f, err := os.CreateTemp("", "rath-import-*.jsonl")
	if err != nil {
		<-c.imports
		return nil, nil, fmt.Errorf("spool import body (the coordinator needs a writable TMPDIR): %w", err)
	}
	release := func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
		<-c.imports
	}
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, c.cfg.MaxImportBytes))
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
		if err != nil {
			err = fmt.Errorf("spool import body: %w", err)
		}
	} else {
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			err = fmt.Errorf("%w after %d bytes: %w", errImportBody, n, err)
		}
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return &spooledImport{File: f, size: n}, release, nil
}

// importFailed answers a failed import. Nothing of it is stored (the
// import is one transaction), which the log line says for operators.
func (c *Coordinator) importFailed(w http.ResponseWriter, r *http.Request, err error) {
	c.log.InfoContext(r.Context(), "import refused; nothing stored", slog.String("path", r.URL.Path), slog.Any("error", err))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large",
			fmt.Sprintf("import body exceeds %d bytes, the coordinator's import limit (--max-import-bytes, RATH_MAX_IMPORT_BYTES)", c.cfg.MaxImportBytes))
	case errors.Is(err, errImportBody):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error()+"; nothing was imported")
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		// The client went away; there is nobody to answer.
	default:
		c.fail(w, r, err)
	}
}
