package trainset_test

import (
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/trainset"
)

// TestReadOpenAIRules: the strict reader refuses every broken rule of the
// fine-tuning chat format, naming line and message.
func TestReadOpenAIRules(t *testing.T) {
	const prov = `,"provenance":{"version_id":"0193a5b0-0000-7000-8000-000000000000","hash":"h","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"created_at":"2026-01-01T00:00:00Z"}}`
	ok := `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r","tool_call_id":"c1"},{"role":"assistant","content":"done"}]` + prov
	n := 0
	if err := trainset.ReadOpenAI(strings.NewReader(ok+"\n"+ok), func(trainset.OpenAIRecord) error { n++; return nil }); err != nil || n != 2 {
		t.Fatalf("valid input: %v (%d records)", err, n)
	}
	for name, tc := range map[string]struct{ line, want string }{
		"empty":           {`{"messages":[]` + prov, "empty"},
		"first assistant": {`{"messages":[{"role":"assistant","content":"x"}]` + prov, "first message"},
		"bad role":        {`{"messages":[{"role":"user","content":"u"},{"role":"robot","content":"x"}]` + prov, `role "robot"`},
		"user last":       {`{"messages":[{"role":"user","content":"u"}]` + prov, "last message"},
		"orphan tool":     {`{"messages":[{"role":"user","content":"u"},{"role":"tool","content":"r","tool_call_id":"zz"},{"role":"assistant","content":"x"}]` + prov, `"zz"`},
		"unanswered call": {`{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","content":"x"}]` + prov, "answered"},
		"dup call id":     {`{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]` + prov, "twice"},
		"bad args":        {`{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{"}}]}]` + prov, "arguments"},
		"unknown field":   {`{"messages":[{"role":"user","content":"u","weight":1},{"role":"assistant","content":"x"}]` + prov, "weight"},
		"null user":       {`{"messages":[{"role":"user","content":null},{"role":"assistant","content":"x"}]` + prov, "string content"},
		"not json":        {`{"messages":`, "line 2"},
	} {
		err := trainset.ReadOpenAI(strings.NewReader(ok+"\n"+tc.line+"\n"), func(trainset.OpenAIRecord) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", name, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v does not name line 2", name, err)
		}
	}
}

func FuzzReadOpenAI(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"x"}],"provenance":{"version_id":"0193a5b0-0000-7000-8000-000000000000","hash":"h","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"created_at":"2026-01-01T00:00:00Z"}}`)
	f.Add(`{"messages":[{"role":"tool","tool_call_id":"a","content":"x"}]}`)
	f.Add("\n\n{}")
	f.Fuzz(func(t *testing.T, in string) {
		_ = trainset.ReadOpenAI(strings.NewReader(in), func(r trainset.OpenAIRecord) error {
			if err := trainset.CheckOpenAI(r.Messages); err != nil {
				t.Fatalf("reader passed a record its own check refuses: %v", err)
			}
			return nil
		})
	})
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add("dDE6OjAxOTNhNWIwLTAwMDAtNzAwMC04MDAwLTAwMDAwMDAwMDAwMA")
	f.Fuzz(func(t *testing.T, in string) {
		_, _, _ = trainset.DecodeCursor(in)
	})
}
