package api

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/rath-run/rath/pkg/session"
)

// The workspace endpoints (docs/api.md, "Workspaces"). Their entries
// mirror pkg/workspace's manifest entries field for field (the same JSON),
// so this package need not import the workspace store and its transport.

// FilesView is the reply of GET /v1/sessions/{id}/files: version ID's
// workspace snapshot and its entries in path order.
type FilesView struct {
	ID session.ID `json:"id"`
	// Snapshot is the version's workspace snapshot id; "" when it has no
	// files.
	Snapshot string `json:"snapshot"`
	// Files counts regular files; Bytes sums their sizes.
	Files   int         `json:"files"`
	Bytes   int64       `json:"bytes"`
	Entries []FileEntry `json:"entries"`
}

// DiffView is the reply of GET /v1/sessions/{id}/diff?to=B: the workspace
// paths that differ from version From to version To, in path order.
type DiffView struct {
	From         session.ID   `json:"from"`
	To           session.ID   `json:"to"`
	FromSnapshot string       `json:"from_snapshot"`
	ToSnapshot   string       `json:"to_snapshot"`
	Changes      []FileChange `json:"changes"`
}

// FileType is the kind of a workspace entry.
type FileType string

// Workspace entry types.
const (
	FileTypeDir     FileType = "dir"
	FileTypeFile    FileType = "file"
	FileTypeSymlink FileType = "symlink"
)

// FileMode is an entry's permission bits (0o777 at most). It encodes in
// JSON as a four-digit octal string such as "0644".
type FileMode uint32

// MarshalJSON writes the mode as a four-digit octal string.
func (m FileMode) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(m.String())), nil
}

// UnmarshalJSON reads an octal string of permission bits.
func (m *FileMode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("mode: want an octal string such as \"0644\": %w", err)
	}
	v, err := ParseFileMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ParseFileMode reads an octal string of permission bits ("0644"), as the
// Rath-File-Mode header and the entries' mode carry it.
func ParseFileMode(s string) (FileMode, error) {
	if len(s) == 0 || len(s) > 4 {
		return 0, fmt.Errorf("mode %q: want 1 to 4 octal digits", s)
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return 0, fmt.Errorf("mode %q: want permission bits 0000..0777", s)
	}
	return FileMode(v), nil
}

// String formats the mode as octal, e.g. "0644".
func (m FileMode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// Perm returns the mode as fs.FileMode permission bits.
func (m FileMode) Perm() fs.FileMode { return fs.FileMode(m).Perm() }

// FileEntry is one path of a workspace.
type FileEntry struct {
	// Path is slash-separated and relative to the workspace root.
	Path string   `json:"path"`
	Type FileType `json:"type"`
	// Mode is the permission bits (not for symlinks).
	Mode FileMode `json:"mode,omitempty"`
	// Size and SHA256 (lower-case hex) describe a file's content.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symlink's target.
	Target string `json:"target,omitempty"`
}

// ChangeKind says how a path differs between two workspaces.
type ChangeKind string

// Change kinds.
const (
	Added   ChangeKind = "added"
	Removed ChangeKind = "removed"
	// Changed: the content, mode, type or symlink target differs.
	Changed ChangeKind = "changed"
)

// FileChange is one path that differs. Before is nil for an added path,
// After for a removed one.
type FileChange struct {
	Path   string     `json:"path"`
	Kind   ChangeKind `json:"kind"`
	Before *FileEntry `json:"before,omitempty"`
	After  *FileEntry `json:"after,omitempty"`
}

// GET /v1/sessions/{id}/files/{path...} answers 200 with the bytes of one
// regular file (Content-Type application/octet-stream) and these headers.
const (
	// HeaderFileMode carries the file's mode as octal ("0644").
	HeaderFileMode = "Rath-File-Mode"
	// HeaderFileSHA256 carries the lower-case hex SHA-256 of the content.
	HeaderFileSHA256 = "Rath-File-Sha256"
)

// MaxFileContent caps GET /v1/sessions/{id}/files/{path...}: a larger
// file is refused with 413 (restore the snapshot to read it whole).
const MaxFileContent = 8 << 20

// FileContent is one workspace file as the file endpoint returns it: its
// bytes, and its mode and SHA-256 from the headers.
type FileContent struct {
	Path    string   `json:"path"`
	Mode    FileMode `json:"mode"`
	SHA256  string   `json:"sha256"`
	Content []byte   `json:"content"`
}
