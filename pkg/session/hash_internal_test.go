package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"
)

// hashVersion is a version with every hashed field set, strings holding
// the characters the encoder escapes (a newline among them).
func hashVersion(t *testing.T) *Version {
	t.Helper()
	id := ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	v := &Version{ID: id, Op: OpStep, Len: 3, Key: "run_x/0\n<&>",
		Chunks:    []Chunk{User("line one\nline two \"quoted\" <b>&amp;</b> \u2028 é"), Assistant("ok")},
		Placement: Placement{Backend: "docker", Snapshot: "snap-1"},
		Usage:     Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7},
		Producer:  Producer{Run: "run_x", Step: "run_x/0", Agent: "a\nb", Model: "m", Worker: "w1", TraceID: "t"},
		Extras:    []Extra{{Key: "loop.stop", Value: json.RawMessage(`"model"`)}, {Key: "x\ny", Value: json.RawMessage(`{"a":"b\nc"}`)}},
		CreatedAt: time.Date(2026, 11, 27, 7, 0, 0, 123456789, time.UTC),
	}
	return v
}

// TestComputeHashIsTheCanonicalEncoding: the hash is sha256 over the
// canonical encoding of the hash input (marshalCanonical), however
// ComputeHash writes it, and it is the hash this format has always given
// (the literal: computed before ComputeHash stopped buffering).
func TestComputeHashIsTheCanonicalEncoding(t *testing.T) {
	v := hashVersion(t)
	parents, base := []string{"p1", "p\n2"}, "base"
	in := hashInput{Format: hashFormat, ID: v.ID, ParentHashes: parents, BaseHash: base, Op: v.Op,
		ChunkHashes: []string{v.Chunks[0].Hash(), v.Chunks[1].Hash()}, Len: v.Len, Placement: v.Placement,
		Usage: v.Usage, Producer: v.Producer, Extras: v.Extras, Key: v.Key, CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano)}
	b, err := marshalCanonical(in)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	want := hex.EncodeToString(sum[:])
	if got := v.ComputeHash(parents, base); got != want {
		t.Fatalf("ComputeHash = %s, sha256(marshalCanonical) = %s", got, want)
	}
	if want != goldenHash {
		t.Fatalf("the hash of the fixed version is %s, was %s: the hash format changed", want, goldenHash)
	}
}

const goldenHash = "745197800efcc6c5ede11e1bc1999f50d4c70009d47c2c254caeaa1ecbbf5686"

// FuzzHashInputEncoding holds the hand-built hash encoding to the
// reflective one it replaced: the same bytes for every input, and an error
// where the encoder fails (an extra that is not JSON).
func FuzzHashInputEncoding(f *testing.F) {
	f.Add("run_x/0", "p1", "base", "step", "user\x00hash", "", "", "run_x", "a\nb", "loop.stop", []byte(`"model"`), int64(7), true)
	f.Add("k\u2028", "p\"2", "", "append", "c", "docker", "snap", "", "\xff", "x", []byte(` { "b":1, "a":[2] } `), int64(-1), false)
	f.Add("<&>", "\\", "é", "merge", "", "", "", "", "", "", []byte(`nope`), int64(0), true)
	f.Fuzz(func(t *testing.T, key, parent, base, op, chunk, backend, snapshot, run, agent, extraKey string, extraValue []byte, n int64, nilExtras bool) {
		in := hashInput{Format: hashFormat, ID: ID{0xde, 0xad, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xbe, 0xef},
			ParentHashes: []string{parent, base}, BaseHash: base, Op: Op(op), ChunkHashes: []string{chunk},
			Len: int(n), Placement: Placement{Backend: backend, Snapshot: snapshot}, Usage: Usage{PromptTokens: n, CompletionTokens: -n, TotalTokens: n / 3},
			Producer: Producer{Run: run, Agent: agent, TraceID: key}, Key: key, CreatedAt: extraKey}
		if !nilExtras {
			in.Extras = []Extra{{Key: extraKey, Value: extraValue}, {Key: "b", Value: json.RawMessage(`"x"`)}}
		}
		if n%2 == 0 {
			in.ParentHashes = nil
			in.Placement.Spec.Env = map[string]string{key: parent}
		}
		want, wantErr := marshalCanonical(in)
		got, err := appendHashInput(nil, &in)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, the encoder's %v", err, wantErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("encoding differs:\n got %s\nwant %s", got, want)
		}
	})
}

// TestUsagesExtraIsCanonical: UsagesExtra writes what Seal would make of
// json.Marshal's encoding, so Seal keeps it as it is.
func TestUsagesExtraIsCanonical(t *testing.T) {
	for _, us := range [][]Usage{nil, {}, {{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}}, {{}, {PromptTokens: -1, CompletionTokens: 1 << 40, TotalTokens: 9}}} {
		raw, err := json.Marshal(us)
		if err != nil {
			t.Fatal(err)
		}
		want, err := canonicalJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := UsagesExtra("k", us).Value
		if string(got) != string(want) || !isCanonical(got) {
			t.Fatalf("UsagesExtra(%v) = %s, canonical %s", us, got, want)
		}
	}
}

// FuzzStringExtra: StringExtra's value is the encoder's, and canonical.
func FuzzStringExtra(f *testing.F) {
	f.Add("model")
	f.Add("a\n\"<&>\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, err := marshalCanonical(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := StringExtra("k", s).Value; string(got) != string(want) {
			t.Fatalf("StringExtra(%q) = %s, encoder %s", s, got, want)
		}
	})
}
