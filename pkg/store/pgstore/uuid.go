package pgstore

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Session ids are google/uuid UUIDs. That type is a driver.Valuer, and pgx
// lets a Valuer's Value take precedence over its [16]byte layout: every id
// argument was turned into its 36-character text, refused by the binary
// uuid encoder (an error built with fmt.Errorf), parsed back as text and
// encoded again — 2–3% of a step's CPU in the Rath process (issue 25).
// RegisterUUID wraps the id types ahead of pgx's own rules, so an id is
// encoded from its 16 bytes.

// RegisterUUID makes m encode uuid.UUID, *uuid.UUID and []uuid.UUID
// arguments from their bytes. AfterConnect calls it on each connection.
func RegisterUUID(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, m.TryWrapEncodePlanFuncs...)
}

// AfterConnect prepares a new connection of a Rath pool ([RegisterUUID]):
// for pgxpool.Config.AfterConnect and stdlib.OptionAfterConnect.
func AfterConnect(_ context.Context, c *pgx.Conn) error {
	RegisterUUID(c.TypeMap())
	return nil
}

func tryWrapUUID(value any) (plan pgtype.WrappedEncodePlanNextSetter, nextValue any, ok bool) {
	switch value.(type) {
	case uuid.UUID:
		return &uuidPlan{}, pgtype.UUID{}, true
	case *uuid.UUID: // non-nil: pgx encodes a nil Valuer pointer as NULL first
		return &uuidPtrPlan{}, pgtype.UUID{}, true
	case []uuid.UUID:
		return &uuidSlicePlan{}, []pgtype.UUID(nil), true
	}
	return nil, nil, false
}

type uuidPlan struct{ next pgtype.EncodePlan }

func (p *uuidPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(pgtype.UUID{Bytes: value.(uuid.UUID), Valid: true}, buf)
}

type uuidPtrPlan struct{ next pgtype.EncodePlan }

func (p *uuidPtrPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPtrPlan) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(*uuid.UUID)
	if id == nil {
		return p.next.Encode(pgtype.UUID{}, buf)
	}
	return p.next.Encode(pgtype.UUID{Bytes: *id, Valid: true}, buf)
}

type uuidSlicePlan struct{ next pgtype.EncodePlan }

func (p *uuidSlicePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidSlicePlan) Encode(value any, buf []byte) ([]byte, error) {
	ids := value.([]uuid.UUID)
	if ids == nil {
		return p.next.Encode([]pgtype.UUID(nil), buf)
	}
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return p.next.Encode(out, buf)
}
