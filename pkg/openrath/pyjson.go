package openrath

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// This file writes JSON the way Python's json.dumps does with its default
// separators (", " and ": ") and ensure_ascii=False, which is how OpenRath
// writes both of its JSONL formats: non-ASCII text raw, only '"', '\\' and
// control characters escaped (as \n, \t, … or \u00XX), floats in Python's
// repr (90.0, 1e+16).

const hexDigits = "0123456789abcdef"

// appendPyString appends s as a JSON string literal, escaped as Python
// escapes it with ensure_ascii=False.
func appendPyString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendPyFloat appends f as Python's repr(float) writes it.
func appendPyFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, fmt.Errorf("float %v has no JSON form", f)
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		return append(b, mant+"e"+expStr...), nil
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return append(b, s...), nil
}

// maxDepth bounds nesting in values this package re-encodes.
const maxDepth = 1000

// appendPyRaw re-encodes one JSON value in Python's style, keeping object
// key order and numbers exactly as written.
func appendPyRaw(b []byte, raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	b, err := appendPyValue(b, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return b, nil
}

func appendPyValue(b []byte, dec *json.Decoder, depth int) ([]byte, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			b = append(b, '{')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b = append(b, ", "...)
				}
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				ks, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				b = appendPyString(b, ks)
				b = append(b, ": "...)
				if b, err = appendPyValue(b, dec, depth+1); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return append(b, '}'), nil
		case '[':
			b = append(b, '[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b = append(b, ", "...)
				}
				if b, err = appendPyValue(b, dec, depth+1); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return append(b, ']'), nil
		default:
			return nil, fmt.Errorf("unexpected %q", t)
		}
	case string:
		return appendPyString(b, t), nil
	case json.Number:
		return append(b, t...), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case nil:
		return append(b, "null"...), nil
	default:
		return nil, fmt.Errorf("unexpected token %v", tok)
	}
}

// pyObject builds one JSON object in Python's style, keys in call order.
type pyObject struct {
	b   []byte
	n   int
	err error
}

func newPyObject() *pyObject { return &pyObject{b: []byte{'{'}} }

func (o *pyObject) key(k string) {
	if o.n > 0 {
		o.b = append(o.b, ", "...)
	}
	o.n++
	o.b = appendPyString(o.b, k)
	o.b = append(o.b, ": "...)
}

func (o *pyObject) str(k, v string) { o.key(k); o.b = appendPyString(o.b, v) }

func (o *pyObject) strPtr(k string, v *string) {
	if v == nil {
		o.null(k)
		return
	}
	o.str(k, *v)
}

func (o *pyObject) int(k string, v int64) { o.key(k); o.b = strconv.AppendInt(o.b, v, 10) }

func (o *pyObject) null(k string) { o.key(k); o.b = append(o.b, "null"...) }

func (o *pyObject) float(k string, v *float64) {
	if v == nil {
		o.null(k)
		return
	}
	o.key(k)
	var err error
	if o.b, err = appendPyFloat(o.b, *v); err != nil && o.err == nil {
		o.err = fmt.Errorf("%s: %w", k, err)
	}
}

func (o *pyObject) strs(k string, v []string) {
	o.key(k)
	if v == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = appendPyStrings(o.b, v)
}

func appendPyStrings(b []byte, v []string) []byte {
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendPyString(b, s)
	}
	return append(b, ']')
}

// raw appends an already Python-encoded value.
func (o *pyObject) raw(k string, v []byte) { o.key(k); o.b = append(o.b, v...) }

// rawJSON re-encodes a JSON value in Python's style.
func (o *pyObject) rawJSON(k string, v []byte) {
	o.key(k)
	var err error
	if o.b, err = appendPyRaw(o.b, v); err != nil && o.err == nil {
		o.err = fmt.Errorf("%s: %w", k, err)
	}
}

func (o *pyObject) bytes() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.b, '}'), nil
}

// pyISOTime formats t as Python's datetime.isoformat() does for an aware
// UTC datetime: microseconds, omitted when zero, and "+00:00".
func pyISOTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000") + "+00:00"
}

// parsePyTime parses an ISO 8601 timestamp as OpenRath writes it (with an
// offset; Python's isoformat). Timestamps without an offset are read as UTC.
func parsePyTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			if y := t.Year(); y < 1 || y > 9999 {
				return time.Time{}, fmt.Errorf("%q is outside years 1-9999", s)
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an ISO 8601 timestamp", s)
}

// MaxLineBytes bounds one line of an OpenRath JSONL file.
const MaxLineBytes = 16 << 20
