package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ManifestVersion is the manifest format this package writes and reads.
const ManifestVersion = 1

// Bounds every manifest obeys, whatever the configured limits.
const (
	// MaxPathBytes bounds an entry's path.
	MaxPathBytes = 4096
	// MaxTargetBytes bounds a symlink's target.
	MaxTargetBytes = 4096
)

// Type is the kind of a manifest entry.
type Type string

// Entry types. Other file types (devices, sockets, pipes) are not recorded.
const (
	TypeDir     Type = "dir"
	TypeFile    Type = "file"
	TypeSymlink Type = "symlink"
)

// Mode is an entry's permission bits (0o777 at most). It encodes in JSON as
// an octal string such as "0644".
type Mode fs.FileMode

// MarshalJSON writes the mode as a four-digit octal string.
func (m Mode) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%q", fmt.Sprintf("%04o", uint32(m)))), nil
}

// UnmarshalJSON reads an octal string of permission bits.
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("mode: want an octal string such as \"0644\": %w", err)
	}
	if len(s) == 0 || len(s) > 4 {
		return fmt.Errorf("mode %q: want 1 to 4 octal digits", s)
	}
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return fmt.Errorf("mode %q: want permission bits 0000..0777", s)
	}
	*m = Mode(v)
	return nil
}

// String formats the mode as octal, e.g. "0644".
func (m Mode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// Entry is one path of a workspace.
type Entry struct {
	// Path is slash-separated and relative to the workspace root, with no
	// ".", ".." or empty components.
	Path string `json:"path"`
	Type Type   `json:"type"`
	// Mode is the permission bits (not for symlinks).
	Mode Mode `json:"mode,omitempty"`
	// Size and SHA256 (lower-case hex) describe a file's content.
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Target is a symlink's target, recorded as read, never followed.
	Target string `json:"target,omitempty"`
}

// Manifest lists a workspace: every directory, regular file and symlink
// under the root, sorted by path (byte order). Its canonical JSON encoding
// ([Manifest.Encode]) hashes to the snapshot's [ID]. Manifests returned by
// this package may be shared: treat them as read-only.
type Manifest struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
}

// Encode returns the canonical encoding: compact JSON, entries in path
// order, as written by this package.
func (m *Manifest) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	entries := m.Entries
	if entries == nil {
		entries = []Entry{}
	}
	if err := enc.Encode(Manifest{Version: m.Version, Entries: entries}); err != nil {
		return nil, fmt.Errorf("workspace: encode manifest: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ID returns the hash of the canonical encoding, the snapshot id. An empty
// manifest's id is "" (no snapshot).
func (m *Manifest) ID() (string, error) {
	if len(m.Entries) == 0 {
		return "", nil
	}
	b, err := m.Encode()
	if err != nil {
		return "", err
	}
	return hashHex(b), nil
}

// Files returns the number of regular files.
func (m *Manifest) Files() int {
	n := 0
	for _, e := range m.Entries {
		if e.Type == TypeFile {
			n++
		}
	}
	return n
}

// TotalBytes returns the sum of the files' sizes.
func (m *Manifest) TotalBytes() int64 {
	var n int64
	for _, e := range m.Entries {
		n += e.Size
	}
	return n
}

// Lookup returns the entry at path p.
func (m *Manifest) Lookup(p string) (Entry, bool) {
	i, ok := m.find(p)
	if !ok {
		return Entry{}, false
	}
	return m.Entries[i], true
}

func (m *Manifest) find(p string) (int, bool) {
	lo, hi := 0, len(m.Entries)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.Entries[mid].Path < p {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(m.Entries) && m.Entries[lo].Path == p
}

// DecodeManifest parses and validates a manifest. It refuses unknown fields,
// trailing data, another format version, paths that are not clean relative
// paths (absolute, "..", ".", empty components, NUL), unsorted or duplicate
// paths, entries whose parent directory is not itself a directory entry (so
// nothing lives under a symlink or a file), and fields that do not fit the
// entry's type. Errors wrap [ErrInvalidManifest] and name the entry.
func DecodeManifest(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the manifest", ErrInvalidManifest)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: trailing data after the manifest", ErrInvalidManifest)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks the rules [DecodeManifest] enforces.
func (m *Manifest) Validate() error {
	if m.Version != ManifestVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrInvalidManifest, m.Version, ManifestVersion)
	}
	for i, e := range m.Entries {
		if err := validEntry(e); err != nil {
			return fmt.Errorf("%w: entries[%d]: %w", ErrInvalidManifest, i, err)
		}
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			return fmt.Errorf("%w: entries[%d]: path %q is not after %q (paths must be sorted and unique)",
				ErrInvalidManifest, i, e.Path, m.Entries[i-1].Path)
		}
		if dir := path.Dir(e.Path); dir != "." {
			j, ok := m.find(dir)
			if !ok || j >= i || m.Entries[j].Type != TypeDir {
				return fmt.Errorf("%w: entries[%d]: parent %q of %q is not a directory entry",
					ErrInvalidManifest, i, dir, e.Path)
			}
		}
	}
	return nil
}

func validEntry(e Entry) error {
	if err := ValidPath(e.Path); err != nil {
		return err
	}
	switch e.Type {
	case TypeDir:
		if e.Size != 0 || e.SHA256 != "" || e.Target != "" {
			return fmt.Errorf("dir %q: size, sha256 and target must be empty", e.Path)
		}
	case TypeFile:
		if e.Size < 0 {
			return fmt.Errorf("file %q: negative size %d", e.Path, e.Size)
		}
		if !validHash(e.SHA256) {
			return fmt.Errorf("file %q: sha256 %q is not 64 lower-case hex digits", e.Path, e.SHA256)
		}
		if e.Target != "" {
			return fmt.Errorf("file %q: target must be empty", e.Path)
		}
	case TypeSymlink:
		if e.Size != 0 || e.SHA256 != "" || e.Mode != 0 {
			return fmt.Errorf("symlink %q: size, sha256 and mode must be empty", e.Path)
		}
		if e.Target == "" || len(e.Target) > MaxTargetBytes || strings.IndexByte(e.Target, 0) >= 0 || !utf8.ValidString(e.Target) {
			return fmt.Errorf("symlink %q: target must be 1..%d bytes of UTF-8 without NUL", e.Path, MaxTargetBytes)
		}
	default:
		return fmt.Errorf("%q: unknown type %q (want dir, file or symlink)", e.Path, e.Type)
	}
	if e.Mode > 0o777 {
		return fmt.Errorf("%q: mode %s has bits beyond 0777", e.Path, e.Mode)
	}
	return nil
}

// ValidPath reports whether p is a clean, slash-separated path relative to
// a workspace root: not empty, not absolute, no ".", ".." or empty
// components, no NUL, valid UTF-8 (JSON cannot carry other bytes). Errors
// wrap [ErrUnsafePath].
func ValidPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", ErrUnsafePath)
	case len(p) > MaxPathBytes:
		return fmt.Errorf("%w: path of %d bytes exceeds %d", ErrUnsafePath, len(p), MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w: path %q contains NUL", ErrUnsafePath, p)
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: path %s is not valid UTF-8", ErrUnsafePath, strconv.QuoteToASCII(p))
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: path %q is absolute", ErrUnsafePath, p)
	}
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "":
			return fmt.Errorf("%w: path %q has an empty component", ErrUnsafePath, p)
		case ".", "..":
			return fmt.Errorf("%w: path %q has a %q component", ErrUnsafePath, p, c)
		}
	}
	return nil
}

// ValidID reports whether id is a snapshot id: "" (the empty workspace) or
// 64 lower-case hex digits.
func ValidID(id string) error {
	if id == "" || validHash(id) {
		return nil
	}
	return fmt.Errorf("%w: snapshot id %q is not 64 lower-case hex digits", ErrInvalidManifest, printable(id))
}

func validHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// printable shortens and sanitizes a string for an error message.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	if !utf8.ValidString(s) {
		return strconv.QuoteToASCII(s)
	}
	return s
}
