package sqlitestore

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/session"
)

// pack is the Go twin of transcriptSQL's packing.
func pack(cs []session.Chunk, ords []int) []byte {
	var b bytes.Buffer
	for i, c := range cs {
		fmt.Fprintf(&b, "%d %s %d %s", ords[i], c.Kind(), len(c.Payload()), c.Payload())
	}
	return b.Bytes()
}

func FuzzUnpackChunks(f *testing.F) {
	cs := []session.Chunk{session.User("a b"), session.Assistant("with 12 spaces and digits 3 4"), session.User("é ✓")}
	f.Add(pack(cs, []int{0, 1, 2}), 3)
	f.Add(pack(cs, []int{2, 0, 1}), 3)
	f.Add(pack(cs, []int{0, 0, 1}), 3)
	f.Add([]byte("0 user 99 {}"), 1)
	f.Add([]byte("0 user -1 {}"), 1)
	f.Add([]byte("0 bogus 2 {}"), 1)
	f.Add([]byte(""), 0)
	f.Fuzz(func(t *testing.T, packed []byte, n int) {
		got, err := unpackChunks(bytes.Clone(packed), n)
		if err != nil {
			return
		}
		if len(got) != n {
			t.Fatalf("unpacked %d chunks, told %d", len(got), n)
		}
		ords := make([]int, len(got))
		for i := range ords {
			ords[i] = i
		}
		again, err := unpackChunks(pack(got, ords), n)
		if err != nil {
			t.Fatalf("repacked chunks do not unpack: %v", err)
		}
		for i := range got {
			if !got[i].Equal(again[i]) {
				t.Fatalf("chunk %d changed on a round trip", i)
			}
		}
	})
}

func FuzzUnpackReached(f *testing.F) {
	id := session.NewID()
	f.Add([]byte(id.String()+" 1 fork 3 2026-11-22T15:04:05.123456789Z 7 "), 1)
	f.Add([]byte(id.String()+" 1 fork 3 2026-11-22T15:04:05.123456789Z 7"), 1)
	f.Add([]byte(id.String()+" x fork 3 2026-13-22T15:04:05.123456789Z 7 "), 1)
	f.Add([]byte("nope 1 fork 3 2026-11-22T15:04:05.123456789Z 7 "), 1)
	f.Fuzz(func(t *testing.T, packed []byte, n int) {
		got, err := unpackReached(packed, n)
		if err == nil && len(got) != n {
			t.Fatalf("unpacked %d rows, told %d", len(got), n)
		}
	})
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	for _, want := range []time.Time{
		time.Date(2026, 11, 22, 15, 4, 5, 123456789, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		got, err := parseTime([]byte(want.Format(timeLayout)))
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%s) = %v, %v", want.Format(timeLayout), got, err)
		}
	}
	for _, bad := range []string{"", "2026-11-22T15:04:05Z", "2026-11-22T15:04:05.12345678xZ", "2026/11/22T15:04:05.123456789Z"} {
		if _, err := parseTime([]byte(bad)); err == nil {
			t.Errorf("parseTime(%q) succeeded", bad)
		}
	}
}
