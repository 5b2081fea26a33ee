package telemetry

import (
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/tool/mcp"
)

// Model labels. Agent specs, which tenants write, choose the model, so a
// model name becomes a metrics label only when the process's operator
// configured it ([Metrics.KnownModels]; "scripted" always is). Every other
// model is counted under [OtherModel], which bounds the series.
const (
	// OtherModel labels calls to models the operator did not configure.
	OtherModel = "other"
	// MaxKnownModels bounds the models with a label of their own.
	MaxKnownModels = 256
)

// knownModels is a *Metrics' set of labeled models.
type knownModels struct {
	set atomic.Pointer[map[string]struct{}]
}

// KnownModels names the models whose calls and costs get their own label
// (with "scripted"), replacing earlier names. Names that are not valid
// model names ([llm.ValidateModel]) are dropped, and at most
// [MaxKnownModels] are kept. Safe to call while the metrics are in use.
func (m *Metrics) KnownModels(names ...string) {
	if m == nil {
		return
	}
	set := map[string]struct{}{llm.ScriptedModel: {}}
	for _, n := range names {
		if len(set) >= MaxKnownModels {
			break
		}
		if llm.ValidateModel(n) == nil {
			set[n] = struct{}{}
		}
	}
	m.models.set.Store(&set)
}

// ModelLabel returns model's metrics label: the model when the operator
// configured it, else [OtherModel].
func (m *Metrics) ModelLabel(model string) string {
	if model == llm.ScriptedModel {
		return model
	}
	if m != nil {
		if set := m.models.set.Load(); set != nil {
			if _, ok := (*set)[model]; ok {
				return model
			}
		}
	}
	return OtherModel
}

// MCPToolLabel labels the calls of every MCP tool: their names
// ("<server>__<tool>") carry a server name the spec chooses, so one label
// per name would let tenants grow the series without bound. Tools the
// worker registers keep their own names.
const MCPToolLabel = "mcp"

// ToolLabel returns a tool's metrics label: its name, or [MCPToolLabel]
// for an MCP tool.
func ToolLabel(name string) string {
	if strings.Contains(name, mcp.Separator) {
		return MCPToolLabel
	}
	return name
}

// maxAttrModelBytes bounds a model name carried in a span attribute or a
// span name; longer ones are cut (the request's model is a validated name
// already; the response's comes from the endpoint).
const maxAttrModelBytes = llm.MaxModelBytes

// modelAttr returns key set to model, cut to maxAttrModelBytes.
func modelAttr(key attribute.Key, model string) attribute.KeyValue {
	return key.String(CapModel(model))
}

// CapModel cuts a model name to the length spans and logs carry.
func CapModel(model string) string {
	if len(model) > maxAttrModelBytes {
		n := maxAttrModelBytes
		for n > 0 && !utf8.RuneStart(model[n]) {
			n--
		}
		return model[:n] + "…"
	}
	return model
}
