package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/tool"
)

type schemaTool struct{ name, schema string }

func (s schemaTool) Def() tool.Def {
	return tool.Def{Name: s.name, Parameters: json.RawMessage(s.schema)}
}
func (schemaTool) ResourceKey(json.RawMessage) string { return "" }
func (schemaTool) Call(context.Context, tool.Env, json.RawMessage) (any, error) {
	return nil, nil
}

func TestNewSetRefusesBadTools(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(secret, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tools []tool.Tool
		want  string
	}{
		{[]tool.Tool{schemaTool{"bad name!", `{}`}}, "must match"},
		{[]tool.Tool{schemaTool{"a", `{}`}, schemaTool{"a", `{}`}}, "appears twice"},
		{[]tool.Tool{schemaTool{"a", `[1]`}}, "tool a: parameters: must be a JSON object schema"},
		{[]tool.Tool{schemaTool{"a", `{"type":7}`}}, "tool a: parameters"},
		{[]tool.Tool{schemaTool{"a", `{"$ref":"file://` + secret + `"}`}}, "not allowed"},
		{[]tool.Tool{schemaTool{"a", `{"$ref":"https://example.com/s.json"}`}}, "not allowed"},
	} {
		_, err := tool.NewSet(tc.tools...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.tools, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	set, err := tool.NewSet(schemaTool{"t", `{"type":"object","properties":{"n":{"type":"integer","maximum":3}},"required":["n"],"additionalProperties":false}`})
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"n":2}`:          "",
		`{"n":2.5}`:        "/n",
		`{"n":9}`:          "/n",
		`{}`:               "missing property 'n'",
		`{"n":1,"m":true}`: "additional properties 'm'",
	} {
		v, err := tool.DecodeArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		err = set.Validate("t", v)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
	if err := set.Validate("nope", map[string]any{}); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("unknown: %v", err)
	}
	for _, bad := range []string{"", "  ", "[1]", `"s"`, "{", "null"} {
		if _, err := tool.DecodeArgs(bad); err == nil {
			t.Errorf("DecodeArgs(%q) accepted", bad)
		}
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":[1,{"b":null}]}`, ``, `[`, `{"a":1e999}`, "{\"a\":\"\xff\"}"} {
		f.Add(s)
	}
	set, err := tool.NewSet(schemaTool{"t", `{"type":"object","properties":{"a":{"type":"number"}}}`})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := tool.DecodeArgs(raw)
		if err != nil {
			return
		}
		if _, ok := v.(map[string]any); !ok {
			t.Fatalf("DecodeArgs(%q) = %T", raw, v)
		}
		_ = set.Validate("t", v)
	})
}
