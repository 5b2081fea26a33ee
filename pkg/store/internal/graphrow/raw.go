package graphrow

import "github.com/rath-run/rath/pkg/session"

// KindOf returns the Kind spelled by b, without allocating for known kinds
// (an unknown one is returned as is, for the chunk check to refuse).
func KindOf(b []byte) session.Kind {
	switch string(b) {
	case string(session.KindUser):
		return session.KindUser
	case string(session.KindAssistant):
		return session.KindAssistant
	case string(session.KindToolResult):
		return session.KindToolResult
	case string(session.KindSystem):
		return session.KindSystem
	case string(session.KindNote):
		return session.KindNote
	case string(session.KindMemoryRecall):
		return session.KindMemoryRecall
	case string(session.KindSelectorDecision):
		return session.KindSelectorDecision
	case string(session.KindApproval):
		return session.KindApproval
	case string(session.KindSummary):
		return session.KindSummary
	}
	return session.Kind(b)
}

// OpOf returns the Op spelled by b, without allocating for known ops.
func OpOf(b []byte) session.Op {
	switch string(b) {
	case string(session.OpCreate):
		return session.OpCreate
	case string(session.OpAppend):
		return session.OpAppend
	case string(session.OpStep):
		return session.OpStep
	case string(session.OpFork):
		return session.OpFork
	case string(session.OpDetach):
		return session.OpDetach
	case string(session.OpMerge):
		return session.OpMerge
	case string(session.OpPlace):
		return session.OpPlace
	}
	return session.Op(b)
}

// Arena copies payloads read from a driver's reused buffers into shared
// blocks, so a transcript of thousands of chunks costs a few allocations.
// The copies are never modified. Blocks grow with what was copied so far
// (each the size of all before it, from 1 KiB up to 64 KiB), so the unused
// tail a result keeps alive is at most about half of what it holds: a
// fixed 64 KiB first block made every cached one-chunk transcript or
// version hold 64 KiB, which was most of a worker's heap.
type Arena struct {
	block  []byte
	copied int // bytes copied so far
}

const (
	arenaMinBlock = 1 << 10
	arenaMaxBlock = 64 << 10
)

// Copy returns a copy of b that shares a block with earlier copies.
func (a *Arena) Copy(b []byte) []byte {
	if cap(a.block)-len(a.block) < len(b) {
		size := min(max(a.copied, arenaMinBlock), arenaMaxBlock)
		a.block = make([]byte, 0, max(size, len(b)))
	}
	n := len(a.block)
	a.block = append(a.block, b...)
	a.copied += len(b)
	return a.block[n : n+len(b) : n+len(b)]
}
