package graphrow_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/session"
	"github.com/rath-run/rath/pkg/store/internal/graphrow"
)

// FuzzParsePlacement: a placement column read back from either store never
// panics the decoder; a refusal is ErrHashMismatch naming the column; what
// decodes encodes to a form that decodes and encodes to itself (the column
// the store would write is stable).
func FuzzParsePlacement(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"backend":"docker","spec":{"image":"alpine:3","entrypoint":["sh","-c"],"env":{"A":"1"},"timeout_seconds":1.5,"working_dir":"/w","network":"none"},"snapshot":"sha256:ab"}`,
		`{"backend":"local","spec":{"env":{}}}`,
		`{"backend":1}`,
		`{"spec":[]}`,
		`null`,
		`[]`,
		`{"backend":"docker"`,
		``,
		`{"spec":{"timeout_seconds":1e400}}`,
		`{"backend":"\ud800"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := graphrow.ParsePlacement(s)
		if err != nil {
			if !errors.Is(err, session.ErrHashMismatch) || !strings.Contains(err.Error(), "stored placement") {
				t.Fatalf("refusal %v is not ErrHashMismatch naming the placement", err)
			}
			return
		}
		enc, err := graphrow.Placement(p)
		if err != nil {
			t.Fatalf("decoded placement %+v does not encode: %v", p, err)
		}
		p2, err := graphrow.ParsePlacement(enc)
		if err != nil {
			t.Fatalf("own encoding %s does not decode: %v", enc, err)
		}
		if enc2, err := graphrow.Placement(p2); err != nil || enc2 != enc {
			t.Fatalf("encoding not stable: %s then %s, %v", enc, enc2, err)
		}
	})
}

// FuzzParseExtras: an extras column never panics the decoder; a refusal is
// ErrHashMismatch naming the column; what decodes re-encodes stably, keeps
// nil (no column, JSON null) and empty ("[]") apart, and keeps its keys in
// order.
func FuzzParseExtras(f *testing.F) {
	for _, s := range []string{
		`null`,
		``,
		`[]`,
		`[["loop.cost_usd",0.25],["note","x"]]`,
		`[["k",{"b":1,"a":[true,null]}]]`,
		`[["k"]]`,
		`[[1,2]]`,
		`[["k",1,2]]`,
		`{"k":1}`,
		`[["k",1]`,
		`[["\ud800",1]]`,
		`[["k",1e999]]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		es, err := graphrow.ParseExtras(s)
		if err != nil {
			if !errors.Is(err, session.ErrHashMismatch) || !strings.Contains(err.Error(), "stored extras") {
				t.Fatalf("refusal %v is not ErrHashMismatch naming the extras", err)
			}
			if es != nil {
				t.Fatalf("refusal returned %v", es)
			}
			return
		}
		// nil exactly for no column or a JSON null (" null" included, a
		// form the stores never write; testdata/fuzz holds it).
		if isNull := s == "" || strings.TrimSpace(s) == "null"; isNull != (es == nil) {
			t.Fatalf("%q decoded to nil=%v", s, es == nil)
		}
		enc, err := graphrow.Extras(es)
		if err != nil {
			t.Fatalf("decoded extras %v do not encode: %v", es, err)
		}
		es2, err := graphrow.ParseExtras(enc)
		if err != nil {
			t.Fatalf("own encoding %s does not decode: %v", enc, err)
		}
		if len(es2) != len(es) || (es2 == nil) != (es == nil) {
			t.Fatalf("round trip changed %v to %v", es, es2)
		}
		for i := range es {
			if es[i].Key != es2[i].Key || string(es[i].Value) != string(es2[i].Value) {
				t.Fatalf("extra %d: %q=%s became %q=%s", i, es[i].Key, es[i].Value, es2[i].Key, es2[i].Value)
			}
		}
		if enc2, err := graphrow.Extras(es2); err != nil || enc2 != enc {
			t.Fatalf("encoding not stable: %s then %s, %v", enc, enc2, err)
		}
	})
}

// FuzzExtrasColumn: the extras column holds what json.Marshal writes for
// the extras (its form before Extras stopped calling it), and fails where
// json.Marshal fails.
func FuzzExtrasColumn(f *testing.F) {
	f.Add("loop.stop", []byte(`"model"`), "x", []byte(`{"b":1,"a":[2]}`), false)
	f.Add("k\u2028<", []byte(` [ 1 , "&" ] `), "", []byte(``), false)
	f.Add("", []byte(`nope`), "y", []byte(`null`), true)
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte, none bool) {
		var e []session.Extra
		if !none {
			e = []session.Extra{{Key: k1, Value: v1}, {Key: k2, Value: v2}}
		}
		want, wantErr := json.Marshal(e)
		got, err := graphrow.Extras(e)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("error %v, json.Marshal's %v", err, wantErr)
		}
		if err == nil && got != string(want) {
			t.Fatalf("column %s, json.Marshal %s", got, want)
		}
	})
}
