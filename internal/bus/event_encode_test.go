package bus

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzAppendEvent: appendEvent encodes what json.Marshal encodes (decoded,
// the same value), is valid JSON, and refuses data that is not JSON.
func FuzzAppendEvent(f *testing.F) {
	f.Add("run_1/0", []byte(`{"text":"ok"}`), int64(0))
	f.Add("", []byte(nil), int64(1))
	f.Add("run_1/a\"b\\c<&>\u2028\x01é", []byte(` { "a" : [1, 2.5e3, "<x>"] } `), int64(1_700_000_000_123_456_789))
	f.Add("run_1/\xff", []byte(`{"a":`), int64(-5))
	f.Fuzz(func(t *testing.T, stepID string, data []byte, nanos int64) {
		e := Event{RunID: "run_01", StepID: stepID, Type: "step.token", Time: time.Unix(0, nanos).UTC(), Data: data}
		got, err := appendEvent(nil, e)
		if len(data) > 0 && !json.Valid(data) {
			if err == nil {
				t.Fatalf("data %q is not JSON, but appendEvent encoded %s", data, got)
			}
			return
		}
		want, werr := json.Marshal(e)
		if (err != nil) != (werr != nil) {
			t.Fatalf("appendEvent error %v, json.Marshal error %v", err, werr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("appendEvent wrote invalid JSON: %s", got)
		}
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("appendEvent\n%s\njson.Marshal\n%s", got, want)
		}
	})
}
