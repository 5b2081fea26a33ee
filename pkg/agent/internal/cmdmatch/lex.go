package cmdmatch

import (
	"errors"
	"regexp"
	"strings"
)

// word is one shell word.
type word struct {
	// raw is the word as written; val its value with quotes and escapes
	// removed (expansions keep their literal text, minus the $).
	raw, val string
	// static: the value is known before the command runs (no expansion,
	// substitution, unquoted glob or brace expansion).
	static bool
	// redirect: the word is a redirection's target.
	redirect bool
	// plainPrefix is how many bytes of val came unquoted and static.
	plainPrefix int
}

var assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// assignment reports whether w is a NAME=value prefix.
func (w word) assignment() bool {
	m := assignRE.FindStringIndex(w.val)
	return m != nil && m[1] <= w.plainPrefix
}

// lexer cuts a script into simple commands of words, collecting the text
// of command substitutions to check on their own.
type lexer struct {
	s    string
	i    int
	cmds [][]word
	cur  []word
	subs []string

	b          strings.Builder
	start      int
	inWord     bool
	static     bool
	plain      bool // no quote or expansion seen yet
	plainLen   int
	brace      bool
	nextRedir  bool
	digitsOnly bool
}

func lex(s string) ([][]word, []string, error) {
	l := &lexer{s: s}
	if err := l.run(); err != nil {
		return nil, nil, err
	}
	l.endCmd()
	return l.cmds, l.subs, nil
}

func (l *lexer) begin() {
	if !l.inWord {
		l.inWord, l.static, l.plain, l.plainLen, l.brace, l.digitsOnly = true, true, true, 0, false, true
		l.start = l.i
		l.b.Reset()
	}
}

// lit appends literal bytes; quoted ones end the plain prefix.
func (l *lexer) lit(s string, quoted bool) {
	l.begin()
	if quoted {
		l.plain = false
	}
	for i := 0; i < len(s); i++ {
		if quoted || s[i] < '0' || s[i] > '9' {
			l.digitsOnly = false
		}
	}
	l.b.WriteString(s)
	if l.plain {
		l.plainLen = l.b.Len()
	}
}

func (l *lexer) dynamic() {
	l.begin()
	l.static, l.plain, l.digitsOnly = false, false, false
}

func (l *lexer) flush() {
	if !l.inWord {
		return
	}
	v := l.b.String()
	static := l.static
	if l.brace && v != "{" && v != "}" && (strings.Contains(v, ",") || strings.Contains(v, "..")) {
		static = false
	}
	l.cur = append(l.cur, word{raw: l.s[l.start:l.i], val: v, static: static, redirect: l.nextRedir, plainPrefix: l.plainLen})
	l.nextRedir = false
	l.inWord = false
}

func (l *lexer) endCmd() {
	l.flush()
	if len(l.cur) > 0 {
		l.cmds = append(l.cmds, l.cur)
		l.cur = nil
	}
	l.nextRedir = false
}

var errUnclosed = errors.New("a quote, $( or ` is not closed")

func (l *lexer) run() error {
	s := l.s
	for l.i < len(s) {
		c := s[l.i]
		switch {
		case c == ' ' || c == '\t':
			l.flush()
			l.i++
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			l.endCmd()
			l.i++
		case c == '#' && !l.inWord:
			for l.i < len(s) && s[l.i] != '\n' {
				l.i++
			}
		case c == '<' || c == '>':
			if l.inWord && l.digitsOnly {
				l.inWord = false // an fd number: 2>file
			}
			l.flush()
			for l.i < len(s) && strings.IndexByte("<>&|-", s[l.i]) >= 0 {
				l.i++
			}
			if l.i < len(s) && s[l.i] == '(' { // process substitution <(…)
				continue
			}
			l.nextRedir = true
		case c == '\\':
			if l.i+1 < len(s) && s[l.i+1] == '\n' {
				l.i += 2
				continue
			}
			if l.i+1 == len(s) {
				l.lit("\\", false)
				l.i++
				continue
			}
			l.lit(s[l.i+1:l.i+2], true)
			l.i += 2
		case c == '\'':
			end := strings.IndexByte(s[l.i+1:], '\'')
			if end < 0 {
				return errUnclosed
			}
			l.lit(s[l.i+1:l.i+1+end], true)
			l.i += end + 2
		case c == '"':
			l.begin()
			l.plain = false
			l.i++
			if err := l.double(); err != nil {
				return err
			}
		case c == '$':
			if err := l.dollar(); err != nil {
				return err
			}
		case c == '`':
			if err := l.backtick(); err != nil {
				return err
			}
		case c == '*' || c == '?' || c == '[':
			l.lit(s[l.i:l.i+1], false)
			l.static, l.plain = false, false
			l.i++
		case c == '{':
			l.lit("{", false)
			l.brace = true
			l.i++
		default:
			l.lit(s[l.i:l.i+1], false)
			l.i++
		}
	}
	return nil
}

// double reads a double-quoted string after its opening quote.
func (l *lexer) double() error {
	s := l.s
	for l.i < len(s) {
		c := s[l.i]
		switch c {
		case '"':
			l.i++
			return nil
		case '\\':
			if l.i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[l.i+1]) >= 0 {
				if s[l.i+1] != '\n' {
					l.lit(s[l.i+1:l.i+2], true)
				}
				l.i += 2
				continue
			}
			l.lit("\\", true)
			l.i++
		case '$':
			if err := l.dollar(); err != nil {
				return err
			}
		case '`':
			if err := l.backtick(); err != nil {
				return err
			}
		default:
			l.lit(s[l.i:l.i+1], true)
			l.i++
		}
	}
	return errUnclosed
}

// dollar reads an expansion at a $.
func (l *lexer) dollar() error {
	s := l.s
	if l.i+1 >= len(s) {
		l.lit("$", false)
		l.i++
		return nil
	}
	switch n := s[l.i+1]; {
	case n == '(':
		end, err := closing(s, l.i+2, '(', ')')
		if err != nil {
			return err
		}
		inner := s[l.i+2 : end]
		l.subs = append(l.subs, strings.TrimSuffix(strings.TrimPrefix(inner, "("), ")"))
		l.dynamic()
		l.lit(inner, true)
		l.i = end + 1
	case n == '{':
		end, err := closing(s, l.i+2, '{', '}')
		if err != nil {
			return err
		}
		l.dynamic()
		l.lit(s[l.i+2:end], true)
		l.i = end + 1
	case n == '\'':
		// $'…' (ANSI-C quoting): escapes decode to anything.
		j := l.i + 2
		for j < len(s) && s[j] != '\'' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return errUnclosed
		}
		l.dynamic()
		l.lit(s[l.i+2:j], true)
		l.i = j + 1
	case n == '"':
		l.dynamic()
		l.i++
	case strings.IndexByte("@*#?!$0123456789", n) >= 0:
		// a special or positional parameter: one character
		l.dynamic()
		l.lit(s[l.i+1:l.i+2], true)
		l.i += 2
	case isNameByte(n):
		j := l.i + 2
		for j < len(s) && isNameByte(s[j]) {
			j++
		}
		l.dynamic()
		l.lit(s[l.i+1:j], true)
		l.i = j
	default:
		l.lit("$", false)
		l.i++
	}
	return nil
}

// backtick reads `…` as a command substitution.
func (l *lexer) backtick() error {
	s := l.s
	var b strings.Builder
	j := l.i + 1
	for ; j < len(s) && s[j] != '`'; j++ {
		if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("$`\\", s[j+1]) >= 0 {
			j++
		}
		b.WriteByte(s[j])
	}
	if j >= len(s) {
		return errUnclosed
	}
	l.subs = append(l.subs, b.String())
	l.dynamic()
	l.lit(b.String(), true)
	l.i = j + 1
	return nil
}

// closing finds the bracket closing the one before i, skipping quotes.
func closing(s string, i int, open, shut byte) (int, error) {
	depth := 1
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return 0, errUnclosed
			}
			i += end + 1
		case '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return 0, errUnclosed
			}
			i = j
		case open:
			depth++
		case shut:
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, errUnclosed
}

// isNameByte reports whether c may be in a parameter name.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}
