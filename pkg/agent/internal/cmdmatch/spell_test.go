package cmdmatch

import (
	"os/exec"
	"strings"
	"testing"
)

// spell writes word with the quoting each byte of choice picks: plain,
// single quotes, double quotes, a backslash, or an empty pair of quotes
// inserted before it. A POSIX shell reads every spelling back as word.
func spell(word string, choice []byte) string {
	var b strings.Builder
	for i := 0; i < len(word); i++ {
		c := byte(0)
		if i < len(choice) {
			c = choice[i]
		}
		ch := word[i : i+1]
		switch c % 6 {
		case 0:
			b.WriteString(ch)
		case 1:
			b.WriteString("'" + ch + "'")
		case 2:
			b.WriteString(`"` + ch + `"`)
		case 3:
			b.WriteString(`\` + ch)
		case 4:
			b.WriteString(`""` + ch)
		case 5:
			b.WriteString(`''` + ch)
		}
	}
	return b.String()
}

var (
	prefixes = []string{"", "sudo ", "env ", "env -i A=1 ", "A=1 ", "command ", "exec ", "nohup ", "timeout 5 ",
		"xargs ", "busybox ", "nice -n 1 ", "/usr/bin/env ", "time ", "! ", "{ ", "if true; then "}
	separators = []string{"", "echo a;", "echo a&&", "echo a||", "echo a|", "echo a&", "(", "true\n", "echo $(", "echo `"}
	gaps       = []string{" ", "\t", "  ", " \t "}
)

// attack builds a command running spelled rm from fuzz bytes, and the
// same command through sh -c when wrap is set.
func attack(data []byte) string {
	at := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	name := spell("rm", data[min(3, len(data)):])
	if at(2)%3 == 1 {
		name = "/bin/" + name
	}
	cmd := separators[int(at(0))%len(separators)] + prefixes[int(at(1))%len(prefixes)] + name +
		gaps[int(at(5))%len(gaps)] + "-f x"
	switch {
	case strings.HasSuffix(separators[int(at(0))%len(separators)], "$("):
		cmd += ")"
	case strings.HasSuffix(separators[int(at(0))%len(separators)], "`"):
		cmd += "`"
	}
	if at(6)%2 == 1 {
		cmd = "sh -c '" + strings.ReplaceAll(cmd, "'", `'\''`) + "'"
	}
	return cmd
}

// TestSpellingsAreRealRm: the shell reads the fuzz target's spellings
// back as rm, so the attacks it makes are real ones.
func TestSpellingsAreRealRm(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	for i := range 6 * 6 {
		sp := spell("rm", []byte{byte(i / 6), byte(i % 6)})
		out, err := exec.Command(sh, "-c", "printf %s "+sp).Output()
		if err != nil || string(out) != "rm" {
			t.Fatalf("sh reads %s as %q (%v), want rm", sp, out, err)
		}
	}
}

// FuzzAttack: any quoting of rm, behind any wrapper or separator, with
// any whitespace, directly or through sh -c, is refused by the pattern rm.
func FuzzAttack(f *testing.F) {
	for _, s := range []string{"", "\x01\x02\x03\x01\x02\x03\x01", "\x09\x05\x01\x04\x05\x03\x00", "\x08\x0a\x02\x02\x02\x01\x01"} {
		f.Add([]byte(s))
	}
	ps := pats(f, "rm")
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd := attack(data)
		if d := Check(cmd, ps); d == nil {
			t.Fatalf("Check(%q) = nil, want refused", cmd)
		}
	})
}
