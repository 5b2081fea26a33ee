package lineage

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/rath-run/rath/pkg/session"
)

// Problem is one stored row that does not verify.
type Problem struct {
	// Table is versions, chunks or lineage.
	Table string `json:"table"`
	// ID is the version the row belongs to (versions.id, chunks.version_id,
	// lineage.child_id).
	ID session.ID `json:"id"`
	// Ord is the chunk's ord (chunks) or the parent's ordinal (lineage),
	// -1 for a versions row.
	Ord int `json:"ord"`
	// Column names what does not match.
	Column string `json:"column"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	switch p.Table {
	case "chunks":
		return fmt.Sprintf("chunks row (version_id=%s, ord=%d) column %s: %s", p.ID, p.Ord, p.Column, p.Detail)
	case "lineage":
		return fmt.Sprintf("lineage row (child_id=%s, ordinal=%d) column %s: %s", p.ID, p.Ord, p.Column, p.Detail)
	}
	return fmt.Sprintf("versions row (id=%s) column %s: %s", p.ID, p.Column, p.Detail)
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	// Versions is how many versions were checked: the one asked about and
	// every version it descends from (parents and bases).
	Versions int       `json:"versions"`
	Chunks   int       `json:"chunks"`
	Problems []Problem `json:"problems,omitempty"`
}

// Uncached is implemented by stores that can read a version past their
// in-process cache (both stores do); Verify uses it so it checks the rows,
// not what the process remembers.
type Uncached interface {
	GetUncached(ctx context.Context, id session.ID) (*session.Version, error)
}

// MaxVerifyProblems bounds VerifyReport.Problems.
const MaxVerifyProblems = 100

// Verify recomputes the hash chain of id and everything it descends from
// (through parents and bases) from the stored rows: each chunk's payload
// must be a valid, canonical chunk, each version's length must add up, and
// each version's hash must equal the hash of its stored fields, its chunk
// rows' hashes and its parents' and base's stored hashes. So an edited,
// reordered, deleted or inserted chunk, an edited version field, a changed
// or removed parent edge, or an edited hash all show as a problem on the
// row they touched or on the version whose hash they break. It returns an
// error wrapping [session.ErrHashMismatch] when there are problems, and
// other errors when the rows cannot be read at all.
//
// Chunk rows' own hash column is not read here (versions hash chunks'
// content, recomputed from the payload); the whole-store check
// (store.Store.Verify, `rathctl verify --all`) compares it too.
func Verify(ctx context.Context, src Source, id session.ID) (VerifyReport, error) {
	get := src.Get
	if u, ok := src.(Uncached); ok {
		get = u.GetUncached
	}
	var rep VerifyReport
	problem := func(p Problem) {
		if len(rep.Problems) < MaxVerifyProblems {
			rep.Problems = append(rep.Problems, p)
		}
	}
	type loaded struct {
		v   *session.Version
		bad bool
	}
	vs := make(map[session.ID]*loaded)
	var order []session.ID
	queue := []session.ID{id}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if _, ok := vs[cur]; ok {
			continue
		}
		if len(vs) >= maxWalk {
			return rep, fmt.Errorf("lineage: verify %s: more than %d versions", id, maxWalk)
		}
		v, err := get(ctx, cur)
		switch {
		case errors.Is(err, session.ErrHashMismatch), errors.Is(err, session.ErrInvalidChunk), errors.Is(err, session.ErrInvalidVersion):
			problem(Problem{Table: "chunks", ID: cur, Ord: -1, Column: "version_id", Detail: err.Error()})
			vs[cur] = &loaded{bad: true}
			continue
		case errors.Is(err, session.ErrNotFound) && cur != id:
			problem(Problem{Table: "lineage", ID: cur, Ord: -1, Column: "parent_id", Detail: "names a version that is not stored"})
			vs[cur] = &loaded{bad: true}
			continue
		case err != nil:
			return rep, fmt.Errorf("lineage: verify: version %s: %w", cur, err)
		}
		vs[cur] = &loaded{v: v}
		order = append(order, cur)
		queue = append(queue, v.Parents...)
		if v.Base != nil {
			queue = append(queue, *v.Base)
		}
	}
	// Parents before children: hashes are checked against stored parents.
	for i := len(order) - 1; i >= 0; i-- {
		v := vs[order[i]].v
		rep.Versions++
		start := v.Len - len(v.Chunks)
		for k, c := range v.Chunks {
			rep.Chunks++
			if c.Redacted() {
				// The stored marker was parsed strictly on load and keeps
				// the original hash; Retention.CheckRedactions (and the
				// store's Verify) check a redactions row records it.
				continue
			}
			nc, err := session.NewChunk(c.Kind(), c.Payload())
			if err != nil {
				problem(Problem{Table: "chunks", ID: v.ID, Ord: start + k, Column: "payload", Detail: err.Error()})
			} else if !bytes.Equal(nc.Payload(), c.Payload()) {
				problem(Problem{Table: "chunks", ID: v.ID, Ord: start + k, Column: "payload", Detail: "payload is not canonical JSON"})
			}
		}
		if err := v.Validate(); err != nil {
			problem(Problem{Table: "versions", ID: v.ID, Ord: -1, Column: "op", Detail: err.Error()})
		}
		parentHashes := make([]string, len(v.Parents))
		linksOK := true
		for k, p := range v.Parents {
			l := vs[p]
			if l == nil || l.bad {
				linksOK = false
				continue
			}
			parentHashes[k] = l.v.Hash
		}
		baseHash := ""
		if v.Base != nil {
			l := vs[*v.Base]
			if l == nil || l.bad {
				linksOK = false
			} else {
				baseHash = l.v.Hash
				if want := l.v.Len + len(v.Chunks); v.Len != want {
					problem(Problem{Table: "versions", ID: v.ID, Ord: -1, Column: "len",
						Detail: fmt.Sprintf("len %d, but base %s has %d and the version %d chunk rows", v.Len, l.v.ID, l.v.Len, len(v.Chunks))})
				}
			}
		}
		if !linksOK {
			problem(Problem{Table: "versions", ID: v.ID, Ord: -1, Column: "hash", Detail: "cannot be checked: a parent or the base does not verify"})
			continue
		}
		if got := v.ComputeHash(parentHashes, baseHash); got != v.Hash {
			problem(Problem{Table: "versions", ID: v.ID, Ord: -1, Column: "hash",
				Detail: fmt.Sprintf("stored %s, but the row's fields, its %d chunk rows and its parents' hashes give %s "+
					"(a field, a chunk, a parent edge or the hash was changed)", v.Hash, len(v.Chunks), got)})
		}
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("%w: %d problem(s) below %s, first: %s", session.ErrHashMismatch, len(rep.Problems), id, rep.Problems[0])
	}
	return rep, nil
}
