package session

import "unicode/utf8"

// isCanonical reports that b is already what canonicalJSON returns for it:
// one JSON value, no insignificant whitespace, object keys in strictly
// increasing order, numbers as written, strings escaped exactly as the
// encoder escapes them. It reads b without allocating. It is a fast path
// only: false means "not proven", and the caller falls back to
// canonicalJSON, which decides. It therefore refuses anything it is not
// sure of (other escapes, U+2028/U+2029, invalid UTF-8, nesting deeper
// than maxCanonicalDepth).
func isCanonical(b []byte) bool {
	n, ok := canonicalValue(b, 0, 0)
	return ok && n == len(b)
}

const maxCanonicalDepth = 32

// canonicalValue checks the value at b[i:] and returns the index after it.
func canonicalValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxCanonicalDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return canonicalString(b, i)
	case c == '{':
		return canonicalObjectAt(b, i, depth)
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(b, i, depth+1); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ']':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return canonicalNumber(b, i)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
				return i + len(lit), true
			}
		}
		return 0, false
	}
}

// canonicalObjectAt checks the object at b[i] == '{'.
func canonicalObjectAt(b []byte, i, depth int) (int, bool) {
	i++
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	prev := -1 // start of the previous key's text, between its quotes
	prevEnd := 0
	for {
		start := i
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		end, ok := canonicalString(b, i)
		if !ok || end >= len(b) || b[end] != ':' {
			return 0, false
		}
		// Keys are compared as written: with only the escapes the encoder
		// writes, and the encoder's key order being by decoded string, a
		// key holding an escape is left to the slow path.
		key := b[start+1 : end-1]
		for _, c := range key {
			if c == '\\' {
				return 0, false
			}
		}
		if prev >= 0 && string(b[prev:prevEnd]) >= string(key) {
			return 0, false // out of order, or repeated (the decoder keeps one)
		}
		prev, prevEnd = start+1, end-1
		if i, ok = canonicalValue(b, end+1, depth+1); !ok || i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i++
		default:
			return 0, false
		}
	}
}

// canonicalString checks the string at b[i] == '"'.
func canonicalString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', 'n', 'r', 't':
				i += 2
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return 0, false
			}
			i += size
		}
	}
	return 0, false
}

// canonicalNumber checks a JSON number at b[i]: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
func canonicalNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}
