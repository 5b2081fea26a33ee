package pgstore

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rath-run/rath/pkg/session"
)

func relativeFields() []pgconn.FieldDescription {
	oids := []uint32{pgtype.UUIDOID, pgtype.Int4OID, pgtype.TextOID, pgtype.Int4OID, pgtype.TimestamptzOID, pgtype.Int2OID}
	out := make([]pgconn.FieldDescription, len(oids))
	for i, oid := range oids {
		out[i] = pgconn.FieldDescription{DataTypeOID: oid, Format: pgx.BinaryFormatCode}
	}
	return out
}

func encodeRelative(id session.ID, depth int32, op string, length int32, created time.Time) [][]byte {
	micros := created.Truncate(time.Microsecond).UnixMicro() - postgresEpochMicros
	nanos := created.Sub(created.Truncate(time.Microsecond))
	return [][]byte{id[:], binary.BigEndian.AppendUint32(nil, uint32(depth)), []byte(op),
		binary.BigEndian.AppendUint32(nil, uint32(length)), binary.BigEndian.AppendUint64(nil, uint64(micros)),
		binary.BigEndian.AppendUint16(nil, uint16(nanos))}
}

func TestDecodeRelative(t *testing.T) {
	t.Parallel()
	id := session.NewID()
	created := time.Date(2026, 11, 22, 15, 4, 5, 123456789, time.UTC)
	r, ok := decodeRelative(relativeFields(), encodeRelative(id, 3, "fork", 10, created))
	if !ok || r.ID != id || r.Depth != 3 || r.Op != session.OpFork || r.Len != 10 || !r.CreatedAt.Equal(created) {
		t.Fatalf("decodeRelative = %+v %v", r, ok)
	}
	old := time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC) // before Postgres's epoch
	if r, ok := decodeRelative(relativeFields(), encodeRelative(id, 1, "step", 0, old)); !ok || !r.CreatedAt.Equal(old) {
		t.Fatalf("decodeRelative before 2000 = %v %v, want %v", r.CreatedAt, ok, old)
	}
	text := relativeFields()
	text[0].Format = pgx.TextFormatCode
	if _, ok := decodeRelative(text, encodeRelative(id, 1, "step", 0, created)); ok {
		t.Fatal("decodeRelative accepted a text-format uuid")
	}
}

func FuzzDecodeRelative(f *testing.F) {
	row := encodeRelative(session.NewID(), 2, "merge", 5, time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	f.Add(row[0], row[1], row[2], row[3], row[4], row[5])
	f.Add([]byte{}, []byte{0}, []byte(nil), []byte{1, 2, 3, 4}, []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g []byte) {
		r, ok := decodeRelative(relativeFields(), [][]byte{a, b, c, d, e, g})
		if ok && (len(a) != 16 || r.ID != session.ID(a)) {
			t.Fatalf("decoded id %s from %x", r.ID, a)
		}
	})
}
