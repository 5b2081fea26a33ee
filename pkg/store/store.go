package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// Store is a Session Graph in a database. Implemented only by this module
// (pgstore, sqlitestore); see the package documentation for the contract.
type Store interface {
	session.Graph

	// GetByKey returns the version committed with key, or
	// [session.ErrNotFound].
	GetByKey(ctx context.Context, key string) (*session.Version, error)
	// Children returns the versions that list id among their parents, in
	// commit order. An unknown id is [session.ErrNotFound].
	Children(ctx context.Context, id session.ID) ([]Info, error)
	// Ancestors returns id's lineage ancestors nearest first, up to maxDepth
	// edges away (maxDepth <= 0: no limit). id itself is not included.
	Ancestors(ctx context.Context, id session.ID, maxDepth int) ([]Relative, error)
	// Descendants returns id's lineage descendants nearest first, up to
	// maxDepth edges away (maxDepth <= 0: no limit).
	Descendants(ctx context.Context, id session.ID, maxDepth int) ([]Relative, error)
	// List pages through versions in commit order.
	List(ctx context.Context, p ListParams) (Page, error)
	// PutMany commits versions in one transaction, in the order given (each
	// version's parents and base must be stored or come earlier in vs). It
	// is the bulk path for imports and fixtures: it checks every version with
	// [session.VerifyLinks] but is not idempotent, so a version whose id or
	// key is already stored makes it fail with [session.ErrConflict] and
	// write nothing.
	PutMany(ctx context.Context, vs []*session.Version) error
	// Bulk runs fn in one transaction for many writes ([session.BulkGraph]):
	// [session.Import] writes a whole file through it, all or nothing.
	Bulk(ctx context.Context, fn func(ctx context.Context, tx session.BulkTx) error) error
	// Tx runs fn with a [TxStore] whose writes commit together when fn
	// returns nil and are rolled back otherwise. fn must not use the Store
	// itself for writes while it runs (the embedded store has one writer).
	Tx(ctx context.Context, fn func(ctx context.Context, tx TxStore) error) error
	// Verify rescans every stored row and recomputes every chunk and version
	// hash from them. Problems are listed in the report, and the error then
	// wraps [session.ErrHashMismatch].
	Verify(ctx context.Context) (VerifyReport, error)
	// Migrate applies the embedded migrations (under a lock on Postgres, so
	// concurrent migrators are safe). Running it again is a no-op.
	Migrate(ctx context.Context) error
	// Close releases the store's connections.
	Close() error
}

// TxStore is the view of a store inside [Store.Tx]. It is a [session.Graph],
// so session operations can run inside a transaction through it, and it is
// valid only until fn returns.
type TxStore interface {
	session.Graph
	GetByKey(ctx context.Context, key string) (*session.Version, error)
}

// Info describes a version without its chunks.
type Info struct {
	ID        session.ID        `json:"id"`
	Parents   []session.ID      `json:"parents"`
	Base      *session.ID       `json:"base,omitempty"`
	Op        session.Op        `json:"op"`
	Len       int               `json:"len"`
	OwnChunks int               `json:"own_chunks"`
	Placement session.Placement `json:"placement,omitzero"`
	Usage     session.Usage     `json:"usage"`
	Producer  session.Producer  `json:"producer,omitzero"`
	Key       string            `json:"key,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	Hash      string            `json:"hash"`
}

// InfoOf returns v's Info.
func InfoOf(v *session.Version) Info {
	return Info{
		ID: v.ID, Parents: v.Parents, Base: v.Base, Op: v.Op, Len: v.Len, OwnChunks: len(v.Chunks),
		Placement: v.Placement, Usage: v.Usage, Producer: v.Producer, Key: v.Key,
		CreatedAt: v.CreatedAt, Hash: v.Hash,
	}
}

// Relative is a version reached from another along lineage edges.
type Relative struct {
	ID session.ID `json:"id"`
	// Depth is the number of edges on the shortest path (1 = parent or child).
	Depth     int        `json:"depth"`
	Op        session.Op `json:"op"`
	Len       int        `json:"len"`
	CreatedAt time.Time  `json:"created_at"`
}

// Limits of [ListParams].
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// ListParams selects a page of versions, in commit order.
type ListParams struct {
	// Limit is the page size: 0 means [DefaultListLimit]; more than
	// [MaxListLimit] is an error.
	Limit int
	// After is the cursor from the previous [Page.Next]; "" starts at the
	// oldest version.
	After string
	// RootsOnly keeps only versions without parents (sessions: create,
	// detach and root imports).
	RootsOnly bool
	// Run keeps only versions produced by this run, when set.
	Run string
}

// Page is one page of [Store.List].
type Page struct {
	Versions []Info `json:"versions"`
	// Next is the cursor for the following page, "" after the last.
	Next string `json:"next,omitempty"`
}

// Normalize checks p and fills in its defaults, returning the position
// after which the page starts.
func (p *ListParams) Normalize() (afterSeq int64, err error) {
	switch {
	case p.Limit < 0:
		return 0, fmt.Errorf("list: limit %d is negative", p.Limit)
	case p.Limit == 0:
		p.Limit = DefaultListLimit
	case p.Limit > MaxListLimit:
		return 0, fmt.Errorf("%w: list: limit %d exceeds %d", session.ErrTooLarge, p.Limit, MaxListLimit)
	}
	if p.After == "" {
		return 0, nil
	}
	return DecodeCursor(p.After)
}

// EncodeCursor returns the opaque cursor for a commit position.
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + strconv.FormatInt(seq, 10)))
}

// DecodeCursor parses a cursor made by [EncodeCursor].
func DecodeCursor(c string) (int64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(raw) > 3 && string(raw[:3]) == "v1:" {
		if seq, err := strconv.ParseInt(string(raw[3:]), 10, 64); err == nil && seq >= 0 {
			return seq, nil
		}
	}
	return 0, fmt.Errorf("list: cursor %q is not one this store issued", c)
}

// VerifyReport is what [Store.Verify] found.
type VerifyReport struct {
	Versions int `json:"versions"`
	Chunks   int `json:"chunks"`
	Edges    int `json:"edges"`
	// Problems lists what did not verify (at most [MaxProblems]).
	Problems []string `json:"problems,omitempty"`
}

// MaxProblems bounds [VerifyReport.Problems].
const MaxProblems = 100
