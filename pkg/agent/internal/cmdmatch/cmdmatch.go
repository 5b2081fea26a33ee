// Package cmdmatch decides whether a shell command (or a program's source)
// is refused by an agent's command_deny patterns. It judges text, as the
// shell would split it, before anything runs; it is a guardrail against a
// model's mistakes, not a sandbox (see docs/tools.md, "Tool policy").
//
// # Patterns
//
// A pattern is one to 16 words separated by spaces, each made of
// [A-Za-z0-9_.+-] ("rm", "git push", "curl"). Words are compared exactly
// and case-sensitively.
//
// # Commands
//
// A command is split as a POSIX shell splits it: quotes and backslashes
// are removed ('r'"m" and \rm are rm), and it is cut into simple commands
// at ; & | && || ( ) { } and newlines. The text of $(…) and `…`, the
// string of sh -c (and bash, dash, zsh, ksh, ash, mksh, busybox sh) and
// the arguments of eval are commands too, checked the same way, to a
// depth of 16.
//
// Each simple command's words are cut into atoms, the runs of
// [A-Za-z0-9_.+-] ("/usr/bin/rm" is bin, usr, rm; --exec=rm is --exec,
// rm). A pattern matches a simple command when its first word is one of
// the atoms and each of its other words is an atom after that one. So a
// pattern bans the mention of a program, wherever it appears: after
// sudo, env, xargs or find -exec, as a path, or in a script string. That
// refuses some harmless commands (grep rm notes.txt); a deny list errs on
// the side of not running.
//
// A command is also refused, whatever the patterns, when the policy cannot
// tell what it runs:
//   - the program name is computed at run time: it holds $ expansions,
//     `…`, $(…), $'…', an unquoted glob (* ? [) or a brace expansion;
//   - a program that runs another program (env, sudo, xargs, find,
//     timeout, nice, nohup, busybox, … see [wrappers]) has such a word
//     among its arguments;
//   - a shell runs a script file or reads its program from standard input
//     (sh script.sh, … | sh), or source / . runs a file;
//   - eval or sh -c gets a computed string;
//   - quotes or $( are not closed, or nesting is deeper than 16.
//
// # Programs in other languages
//
// [CheckText] scans source text (run_code's python or javascript, and the
// inline code of python -c, node -e and the like, which are words of the
// command) by atoms only: a pattern matches when its first word is an atom
// of the text and its other words are atoms after it. Code that builds a
// name ("r" + "m") or runs a file the model wrote is not seen; remove the
// program from the sandbox image when it must never run.
package cmdmatch

import (
	"errors"
	"fmt"
	"strings"
)

// Limits on patterns and nesting.
const (
	MaxPatternBytes = 256
	MaxPatternWords = 16
	MaxDepth        = 16
)

// Pattern is a parsed command_deny entry.
type Pattern struct {
	// Text is the pattern as written.
	Text  string
	words []string
}

// ParsePattern parses one command_deny entry.
func ParsePattern(s string) (Pattern, error) {
	if len(s) > MaxPatternBytes {
		return Pattern{}, fmt.Errorf("%d bytes, limit %d", len(s), MaxPatternBytes)
	}
	words := strings.Fields(s)
	switch {
	case len(words) == 0:
		return Pattern{}, errors.New("empty pattern")
	case len(words) > MaxPatternWords:
		return Pattern{}, fmt.Errorf("%d words, limit %d", len(words), MaxPatternWords)
	}
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			if !isAtom(w[i]) {
				return Pattern{}, fmt.Errorf("word %q: %q is not allowed (words are [A-Za-z0-9_.+-]; a pattern names a program and its arguments, not a path or shell syntax)", w, w[i])
			}
		}
	}
	return Pattern{Text: s, words: words}, nil
}

// Denial says why a command is refused.
type Denial struct {
	// Pattern is the matching pattern's text; empty when the command is
	// refused because the policy cannot tell what it runs.
	Pattern string
	// Reason explains the refusal in words for the model.
	Reason string
	// Command is the simple command (or text) that was judged, cut.
	Command string
}

func (d *Denial) Error() string {
	if d.Pattern != "" {
		return fmt.Sprintf("command_deny pattern %q matches %q", d.Pattern, d.Command)
	}
	return fmt.Sprintf("cannot check %q against command_deny: %s", d.Command, d.Reason)
}

// Check judges a shell script (a run_shell_command cmd or a sh/bash
// program) against pats. It returns nil when the script may run. With no
// patterns nothing is refused.
func Check(script string, pats []Pattern) *Denial {
	if len(pats) == 0 {
		return nil
	}
	return check(script, pats, 0)
}

// CheckText judges source text in another language by its atoms.
func CheckText(text string, pats []Pattern) *Denial {
	if len(pats) == 0 {
		return nil
	}
	if p := matchAtoms(atoms(nil, text), pats); p != "" {
		return &Denial{Pattern: p, Reason: "mentioned in the program", Command: cut(text)}
	}
	return nil
}

func isAtom(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '+' || c == '-'
}

// atoms appends the atoms of s to dst.
func atoms(dst []string, s string) []string {
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && isAtom(s[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			dst = append(dst, s[start:i])
			start = -1
		}
	}
	return dst
}

// matchAtoms returns the first pattern whose first word is an atom and
// whose other words are atoms after it.
func matchAtoms(as []string, pats []Pattern) string {
	for _, p := range pats {
		for i, a := range as {
			if a != p.words[0] {
				continue
			}
			if allAfter(as[i+1:], p.words[1:]) {
				return p.Text
			}
		}
	}
	return ""
}

func allAfter(as, words []string) bool {
next:
	for _, w := range words {
		for _, a := range as {
			if a == w {
				continue next
			}
		}
		return false
	}
	return true
}

func cut(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// shells run their -c string; eval runs its arguments.
var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true,
	"mksh": true, "yash": true, "posh": true, "rbash": true, "fish": true, "tcsh": true, "csh": true,
}

// wrappers run another program named among their arguments.
var wrappers = map[string]bool{
	"env": true, "command": true, "builtin": true, "exec": true, "nohup": true, "nice": true,
	"ionice": true, "timeout": true, "time": true, "sudo": true, "doas": true, "su": true,
	"runuser": true, "xargs": true, "find": true, "busybox": true, "setsid": true, "stdbuf": true,
	"chroot": true, "watch": true, "strace": true, "ltrace": true, "flock": true, "parallel": true,
	"unbuffer": true, "taskset": true, "chrt": true, "script": true, "sg": true, "fakeroot": true,
	"nsenter": true, "unshare": true, "ssh": true, "docker": true, "kubectl": true,
	"awk": true, "gawk": true, "mawk": true, "nawk": true, "perl": true, "python": true,
	"python3": true, "python2": true, "node": true, "ruby": true, "php": true, "lua": true,
}

// reserved words that may precede a command in a simple command.
var reserved = map[string]bool{
	"!": true, "{": true, "}": true, "if": true, "then": true, "else": true, "elif": true, "fi": true,
	"do": true, "done": true, "while": true, "until": true, "time": true, "function": true,
}

// check judges one script at a nesting depth.
func check(script string, pats []Pattern, depth int) *Denial {
	if depth > MaxDepth {
		return &Denial{Reason: fmt.Sprintf("nested deeper than %d levels", MaxDepth), Command: cut(script)}
	}
	cmds, subs, err := lex(script)
	if err != nil {
		return &Denial{Reason: err.Error(), Command: cut(script)}
	}
	for _, sub := range subs {
		if d := check(sub, pats, depth+1); d != nil {
			return d
		}
	}
	for _, c := range cmds {
		if d := judge(c, pats, depth); d != nil {
			return d
		}
	}
	return nil
}

// judge checks one simple command.
func judge(c []word, pats []Pattern, depth int) *Denial {
	text := render(c)
	var as []string
	for _, w := range c {
		as = atoms(as, w.val)
	}
	if p := matchAtoms(as, pats); p != "" {
		return &Denial{Pattern: p, Command: text}
	}
	refuse := func(format string, args ...any) *Denial {
		return &Denial{Reason: fmt.Sprintf(format, args...), Command: text}
	}
	// The command name: past redirection targets, assignments and
	// reserved words.
	k := 0
	for ; k < len(c); k++ {
		w := c[k]
		if w.redirect || w.assignment() || w.static && reserved[w.val] {
			continue
		}
		if w.static && (w.val == "for" || w.val == "case" || w.val == "select") {
			return nil // their words are not commands; the body's commands are cut apart
		}
		break
	}
	if k == len(c) {
		return nil
	}
	name := c[k]
	if !name.static {
		return refuse("the program name %q is computed when the command runs", name.raw)
	}
	base := basename(name.val)
	wrapped := wrappers[base]
	for j := k; j < len(c); j++ {
		w := c[j]
		if w.redirect {
			continue
		}
		if j > k && !wrapped {
			break
		}
		if !w.static {
			return refuse("%s runs other programs and its argument %q is computed when the command runs", base, w.raw)
		}
		b := basename(w.val)
		switch {
		case shells[b]:
			return shell(b, c[j+1:], pats, depth, refuse)
		case b == "eval" && j == k:
			var parts []string
			for _, a := range c[j+1:] {
				if !a.static {
					return refuse("eval of the computed %q", a.raw)
				}
				if !a.redirect {
					parts = append(parts, a.val)
				}
			}
			return check(strings.Join(parts, " "), pats, depth+1)
		case (b == "source" || b == ".") && j == k:
			return refuse("%s runs a file the policy cannot see", b)
		}
	}
	return nil
}

// shell judges a shell's arguments: its -c string is a script; a shell that
// runs a file or reads standard input is refused.
func shell(name string, args []word, pats []Pattern, depth int, refuse func(string, ...any) *Denial) *Denial {
	cflag, optsDone := false, false
	for j := 0; j < len(args); j++ {
		a := args[j]
		if a.redirect {
			continue
		}
		if !a.static {
			return refuse("%s argument %q is computed when the command runs", name, a.raw)
		}
		v := a.val
		if !optsDone && len(v) > 1 && (v[0] == '-' || v[0] == '+') {
			switch {
			case v == "--":
				optsDone = true
			case strings.HasPrefix(v, "--"):
				if v == "--rcfile" || v == "--init-file" {
					j++
				}
			default:
				if v[0] == '-' && strings.ContainsRune(v[1:], 'c') {
					cflag = true
				}
				if strings.ContainsAny(v[1:], "oO") {
					j++ // -o takes an option name
				}
			}
			continue
		}
		if !cflag {
			return refuse("%s runs the script file %q, which the policy cannot see", name, v)
		}
		return check(v, pats, depth+1)
	}
	if cflag {
		return refuse("%s -c without a command string", name)
	}
	return refuse("%s reads its program from standard input, which the policy cannot see", name)
}

func basename(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func render(c []word) string {
	parts := make([]string, 0, len(c))
	for _, w := range c {
		parts = append(parts, w.raw)
	}
	return cut(strings.Join(parts, " "))
}
