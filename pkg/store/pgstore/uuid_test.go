package pgstore

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestUUIDEncodesItsBytes: with RegisterUUID, an id argument is encoded
// from its 16 bytes by the wrapper, where pgx's own rules take the
// driver.Valuer detour (text, an encode error, a parse, a second encode).
func TestUUIDEncodesItsBytes(t *testing.T) {
	id := uuid.New()
	plain := pgtype.NewMap()
	if _, ours := plain.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id).(*uuidPlan); ours {
		t.Fatal("a plain map already uses the wrapper")
	}
	m := pgtype.NewMap()
	RegisterUUID(m)
	for _, c := range []struct {
		oid   uint32
		value any
	}{{pgtype.UUIDOID, id}, {pgtype.UUIDOID, &id}, {pgtype.UUIDArrayOID, []uuid.UUID{id, id}}} {
		want, err := plain.Encode(c.oid, pgtype.BinaryFormatCode, c.value, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Encode(c.oid, pgtype.BinaryFormatCode, c.value, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%T: encodes %x, %v; want pgx's own %x", c.value, got, err, want)
		}
	}
	switch p := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id).(type) {
	case *uuidPlan:
	default:
		t.Fatalf("uuid.UUID is planned with %T, want the wrapper", p)
	}
	if b, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, (*uuid.UUID)(nil), nil); err != nil || b != nil {
		t.Fatalf("nil *uuid.UUID encodes %x, %v; want NULL", b, err)
	}
	allocs := testing.AllocsPerRun(100, func() { _, _ = m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, make([]byte, 0, 64)) })
	before := testing.AllocsPerRun(100, func() { _, _ = plain.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, make([]byte, 0, 64)) })
	if allocs >= before {
		t.Fatalf("the wrapper allocates %.0f per id, pgx's detour %.0f: no saving", allocs, before)
	}
	t.Logf("allocations per id: %.0f (pgx's detour: %.0f)", allocs, before)
}
