package mcp

import (
	"encoding/json"
	"errors"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rath-run/rath/pkg/tool"
)

// FuzzFlatten decodes a tools/call result as a server may send it and
// flattens it: never a panic, and the body always marshals.
func FuzzFlatten(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hi"}]}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
		`{"content":[],"structuredContent":{"answer":42}}`,
		`{"content":[]}`,
		`{"content":[{"type":"text","text":"disk on fire"}],"isError":true}`,
		`{"content":[],"isError":true,"structuredContent":[1,2]}`,
		`{"content":[{"type":"image","mimeType":"image/png","data":"iVBORw=="}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///x","text":"t"}}]}`,
		`{"content":[{"type":"resource_link","uri":"file:///x","name":"x"}]}`,
		`{"content":[{"type":"audio","mimeType":"audio/wav","data":""}],"isError":true}`,
		`{"content":[{"type":"bogus"}]}`,
		`{"content":null}`,
		`{}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var res *sdk.CallToolResult
		if err := json.Unmarshal(b, &res); err != nil {
			return
		}
		v, err := flatten(res)
		if err != nil {
			var te *tool.Error
			if !errors.As(err, &te) || te.Kind != tool.KindExecution || te.Message == "" {
				t.Fatalf("flatten error %#v", err)
			}
			if _, err := json.Marshal(te); err != nil {
				t.Fatalf("error body does not marshal: %v", err)
			}
			return
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("body %#v does not marshal: %v", v, err)
		}
	})
}
