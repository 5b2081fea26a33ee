package session

import "errors"

// Sentinel errors. Graph implementations translate their own failures into
// these at their boundary, so callers branch with errors.Is whatever graph
// they hold.
var (
	// ErrNotFound: no version with that id (or key) exists.
	ErrNotFound = errors.New("rath: version not found")
	// ErrConflict: a write collides with what is stored, such as an id reused
	// for different content.
	ErrConflict = errors.New("rath: conflicting version")
	// ErrInvalidID: a string is not a version id.
	ErrInvalidID = errors.New("rath: invalid version id")
	// ErrInvalidChunk: a chunk's kind or payload is malformed.
	ErrInvalidChunk = errors.New("rath: invalid chunk")
	// ErrInvalidVersion: a version's fields are inconsistent.
	ErrInvalidVersion = errors.New("rath: invalid version")
	// ErrHashMismatch: a stored or imported hash does not match its content.
	ErrHashMismatch = errors.New("rath: hash mismatch")
	// ErrCycle: lineage would contain a cycle.
	ErrCycle = errors.New("rath: lineage cycle")
	// ErrIncompatiblePlacement: merge of sessions placed on different backends.
	ErrIncompatiblePlacement = errors.New("rath: sessions are placed on different backends")
	// ErrDifferentGraph: an operation mixes sessions from different graphs.
	ErrDifferentGraph = errors.New("rath: sessions belong to different graphs")
	// ErrTooLarge: an input exceeds a documented limit.
	ErrTooLarge = errors.New("rath: input too large")
	// ErrUnavailable: the graph's backing store cannot be reached right now;
	// the operation may be retried.
	ErrUnavailable = errors.New("rath: store unavailable")
)
