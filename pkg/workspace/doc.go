// Package workspace makes a sandbox's workspace travel with its session:
// it snapshots a host directory into an object store as a content-addressed,
// deduplicated snapshot, restores a snapshot into an empty directory, and
// compares snapshots.
//
// # Layout in the store
//
// Each regular file's content is stored once, as the object
// "blob/<sha256 of the content>". A [Manifest] lists every directory, file
// (path, mode, size, hash) and symlink (its target, recorded as read and
// never followed) in path order; its canonical encoding is stored as
// "manifest/<sha256 of the encoding>", and that hash is the snapshot [ID]
// recorded in a version's placement. A manifest is written only after all
// the blobs it names, so a manifest that exists is complete. Objects are
// immutable and never deleted by this package.
//
// # Contracts
//
//   - Deterministic: the same tree (paths, permission bits, contents,
//     symlink targets) always yields the same ID. Modification times,
//     owners and other file types (sockets, pipes, devices: skipped and
//     reported) are not recorded.
//   - Nothing is rewritten: a snapshot equal to the base it was restored
//     from, or already stored, writes nothing; a changed snapshot writes its
//     manifest and only the blobs not already stored. A fork shares its
//     parent's ID and costs nothing.
//   - The empty workspace is ID "" and is never stored; restoring "" yields
//     an empty directory.
//   - Restore writes only inside the target directory (through [os.Root]),
//     never follows a symlink while writing, refuses manifests whose paths
//     escape or whose entries live under a symlink, and verifies every
//     file's size and hash.
//   - Limits ([Limits]) are checked before anything is read or written, on
//     both snapshot and restore; the error wraps [ErrTooLarge] and names the
//     limit.
//
// The [Store] seam is small so tests and in-process runtimes can use
// [MemoryStore]; [JetStream] adapts the JetStream object store bucket the
// bus declares.
package workspace

import "errors"

// Errors, wrapped with context. Test with errors.Is.
var (
	// ErrNotFound: the snapshot (or one of its blobs) is not in the store.
	ErrNotFound = errors.New("workspace: not found in the store")
	// ErrTooLarge: past a configured limit; the message names it.
	ErrTooLarge = errors.New("workspace: over a workspace limit")
	// ErrInvalidManifest: a manifest or snapshot id that does not decode or
	// validate.
	ErrInvalidManifest = errors.New("workspace: invalid manifest")
	// ErrUnsafePath: a path that is absolute, has "..", or otherwise cannot
	// be a clean workspace-relative path.
	ErrUnsafePath = errors.New("workspace: unsafe path")
	// ErrCorrupt: stored content does not match its hash or size.
	ErrCorrupt = errors.New("workspace: stored content does not match its hash")
	// ErrChanged: a file changed while it was being snapshotted.
	ErrChanged = errors.New("workspace: file changed during snapshot")
	// ErrNotEmpty: the restore target is not an empty directory.
	ErrNotEmpty = errors.New("workspace: restore target is not empty")
)
