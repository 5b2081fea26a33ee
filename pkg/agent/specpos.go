package agent

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// SpecError is an agent spec error located in its document, reported the
// way workflow file errors are (package flowfile): "file:line:col: field:
// message". It wraps [ErrInvalidSpec].
type SpecError struct {
	// File is the document's name ("" when it has none).
	File string
	// Line and Column are 1-based; 0 when the field could not be located.
	Line, Column int
	// Field is the path of the offending field ("limits.max_tool_rounds",
	// "mcp[1].name"); "" for a document-level error.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

func (e *SpecError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Column)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes every SpecError match [ErrInvalidSpec].
func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

// ParseSpecFile is [ParseSpec] for a document with a name (a file path):
// its errors are *[SpecError]s naming the file, the line and column of the
// offending field (its key; the document's start when there is no field)
// and the field's path.
func ParseSpecFile(name string, b []byte) (Spec, error) {
	s, err := ParseSpec(b)
	if err == nil {
		return s, nil
	}
	return Spec{}, LocateSpecError(name, b, err)
}

var (
	specUnknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)
	// encoding/json's type errors: "cannot unmarshal string into Go struct
	// field Spec.limits.max_tool_rounds of type int".
	specTypeFieldRE = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.([A-Za-z0-9_.]+) of type`)
	specYAMLLineRE  = regexp.MustCompile(`yaml: line (\d+): `)
	specIndexRE     = regexp.MustCompile(`^([A-Za-z0-9_]+)((?:\[\d+\])*)$`)
	specDigitsRE    = regexp.MustCompile(`\d+`)
)

// LocateSpecError turns err, an error [ParseSpec] returned for doc, into a
// *[SpecError] at the offending field's position. An error that is not an
// invalid-spec error is returned as it is.
func LocateSpecError(name string, doc []byte, err error) error {
	if err == nil || !errors.Is(err, ErrInvalidSpec) {
		return err
	}
	var se *SpecError
	if errors.As(err, &se) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), ErrInvalidSpec.Error()+": ")
	e := &SpecError{File: name, Msg: msg}
	var root yaml3.Node
	if yerr := yaml3.Unmarshal(doc, &root); yerr != nil {
		// A syntax error: the YAML parser knows the line.
		if m := specYAMLLineRE.FindStringSubmatch(yerr.Error()); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Column = 1
		}
		return e.inside(doc)
	}
	doc0 := &root
	if doc0.Kind == yaml3.DocumentNode && len(doc0.Content) == 1 {
		doc0 = doc0.Content[0]
	}
	e.Line, e.Column = doc0.Line, doc0.Column
	var path string
	switch {
	case specUnknownFieldRE.MatchString(msg):
		key := specUnknownFieldRE.FindStringSubmatch(msg)[1]
		e.Msg = fmt.Sprintf("unknown field %q", key)
		if k := findSpecKey(doc0, key); k != nil {
			e.Line, e.Column = k.Line, k.Column
			e.Field = specKeyPath(doc0, k, "", 0)
		}
		if e.Field == "" {
			e.Field = key
		}
		return e.inside(doc)
	case specTypeFieldRE.MatchString(msg):
		path = specTypeFieldRE.FindStringSubmatch(msg)[1]
		e.Msg = strings.TrimPrefix(msg, "json: ")
	default:
		field, rest, ok := strings.Cut(msg, ": ")
		if !ok || strings.ContainsAny(field, " \"") {
			return e.inside(doc)
		}
		path, e.Msg = field, rest
	}
	e.Field = path
	at, _ := SpecNode(doc0, path)
	e.Line, e.Column = at.Line, at.Column
	return e.inside(doc)
}

// SpecNode walks a spec's YAML tree from root along a field path as spec
// errors name fields ("tools[2]", "mcp[0].command": the key command of
// mcp's first item) and returns the deepest node it reached (root when
// none) and whether that is the whole path.
func SpecNode(root *yaml3.Node, path string) (at *yaml3.Node, whole bool) {
	at, cur := root, root
	for part := range strings.SplitSeq(path, ".") {
		m := specIndexRE.FindStringSubmatch(part)
		if m == nil {
			return at, false
		}
		k, v := specMappingKey(cur, m[1])
		if k == nil {
			return at, false
		}
		at, cur = k, v
		for _, idx := range specDigitsRE.FindAllString(m[2], -1) {
			i, _ := strconv.Atoi(idx)
			if cur.Kind != yaml3.SequenceNode || i >= len(cur.Content) {
				return at, false
			}
			cur = cur.Content[i]
			at = cur
		}
	}
	return at, true
}

// inside drops a position past the document's last line (the YAML parser
// places an empty document's node after it): 0 means unknown.
func (e *SpecError) inside(doc []byte) *SpecError {
	if e.Line > docLines(doc) {
		e.Line, e.Column = 0, 0
	}
	return e
}

// docLines counts doc's lines the way the YAML parser breaks them (CR LF,
// CR, LF, NEL, LS, PS).
func docLines(doc []byte) int {
	return strings.Count(lineBreaks.Replace(string(doc)), "\n") + 1
}

var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

// specMappingKey returns the key and value nodes of key in mapping m.
func specMappingKey(m *yaml3.Node, key string) (k, v *yaml3.Node) {
	if m == nil || m.Kind != yaml3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// maxSpecDepth bounds the searches below; ParseSpec has already refused
// deeper documents or they are not specs.
const maxSpecDepth = 64

// findSpecKey returns the first key named key in n's mappings, breadth
// first so that a top-level key wins over a nested one.
func findSpecKey(n *yaml3.Node, key string) *yaml3.Node {
	level := []*yaml3.Node{n}
	for d := 0; d < maxSpecDepth && len(level) > 0; d++ {
		var next []*yaml3.Node
		for _, c := range level {
			if c.Kind == yaml3.MappingNode {
				for i := 0; i+1 < len(c.Content); i += 2 {
					if c.Content[i].Value == key {
						return c.Content[i]
					}
				}
			}
			next = append(next, c.Content...)
		}
		level = next
	}
	return nil
}

// specKeyPath returns the field path of key node k under n ("limits.x",
// "mcp[0].y"), or "" when k is not under n.
func specKeyPath(n, k *yaml3.Node, prefix string, depth int) string {
	if depth > maxSpecDepth {
		return ""
	}
	switch n.Kind {
	case yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if prefix != "" {
				p = prefix + "." + p
			}
			if n.Content[i] == k {
				return p
			}
			if s := specKeyPath(n.Content[i+1], k, p, depth+1); s != "" {
				return s
			}
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			if s := specKeyPath(c, k, fmt.Sprintf("%s[%d]", prefix, i), depth+1); s != "" {
				return s
			}
		}
	}
	return ""
}
