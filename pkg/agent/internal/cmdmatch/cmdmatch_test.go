package cmdmatch

import (
	"strings"
	"testing"
)

func pats(t testing.TB, ps ...string) []Pattern {
	t.Helper()
	var out []Pattern
	for _, p := range ps {
		pp, err := ParsePattern(p)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", p, err)
		}
		out = append(out, pp)
	}
	return out
}

func TestParsePattern(t *testing.T) {
	for _, bad := range []string{"", "   ", "/bin/rm", "rm;", "r*m", "$x", "a'b", strings.Repeat("a ", 17), strings.Repeat("a", 257)} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) = nil error", bad)
		}
	}
	for _, good := range []string{"rm", "git push", "rm -rf", "curl", "python3.12", "g++"} {
		if _, err := ParsePattern(good); err != nil {
			t.Errorf("ParsePattern(%q): %v", good, err)
		}
	}
}

// TestDenied is the attack table: every command here must be refused by
// the patterns rm, "git push" and curl, either by a match or because the
// policy cannot tell what runs.
func TestDenied(t *testing.T) {
	ps := pats(t, "rm", "git push", "curl")
	for _, cmd := range []string{
		// plain, paths and whitespace
		"rm -rf x", "  rm\t-rf x", "/bin/rm x", "/usr/bin/../bin/rm x", "./rm x",
		"echo a;rm x", "echo a&&rm x", "echo a||rm x", "echo a|rm x", "echo a&rm x", "(rm x)", "{ rm x; }",
		"true\nrm x", "if true; then rm x; fi", "while false; do rm x; done", "! rm x",
		// quoting and escapes
		"'rm' x", "\"rm\" x", "r'm' x", "r\"\"m x", "\\rm x", "r\\m x", "'r'\"m\" x", "r\\\nm x",
		// wrappers and indirect execution
		"sudo rm x", "env rm x", "env -i FOO=1 rm x", "FOO=1 rm x", "command rm x", "exec rm x",
		"nohup rm x", "nice -n 5 rm x", "timeout 5 rm x", "xargs rm < list", "find . -exec rm {} ;",
		"busybox rm x", "time rm x", "echo x | xargs -I{} rm {}", "cp /bin/rm ./del",
		// shells and eval
		"sh -c 'rm x'", "bash -c \"rm x\"", "sh -c 'r\"\"m x'", "sh -ec 'rm x'", "bash -lc 'rm x'",
		"sh -c \"sh -c 'r\\\\m x'\"", "env sh -c 'rm x'", "sudo bash -c 'rm x'", "find . -exec sh -c 'rm {}' ;",
		"eval rm x", "eval 'r''m' x", "eval \"r\"m x", "sh -c -- 'rm x'", "/bin/sh -c 'rm x'",
		"sh script.sh", "bash ./x.sh", "echo 'rm x' | sh", "base64 -d f | bash", "source f.sh", ". ./f.sh",
		"sh -c \"$CMD\"", "eval $CMD", "bash -c",
		// substitutions
		"echo $(rm x)", "echo `rm x`", "echo \"$(rm x)\"", "x=$(rm y) true", "cat <(rm x)", "$(echo rm) x",
		"`echo rm` x", "echo $((1)) && rm x",
		// computed program names
		"$CMD x", "${CMD} x", "a=r; ${a}m x", "\"$a\"m x", "$'\\x72m' x", "$'rm' x", "/bin/r? x", "/bin/r* x",
		"/bin/[r]m x", "{rm,x}", "{r,}m x", "env $CMD x", "xargs $CMD", "timeout 5 $(which rm) x", "sudo $X",
		// multi-word patterns
		"git push", "git -C repo push origin", "git push --force", "/usr/bin/git push", "cd r && git push",
		"sh -c 'git push'", "g''it pu''sh",
		// mentions in interpreters' inline code
		"python3 -c 'import os; os.system(\"rm -rf x\")'", "node -e 'require(\"child_process\").execSync(\"curl x\")'",
		"perl -e 'system(\"rm\", \"x\")'", "awk 'BEGIN{system(\"rm x\")}'", "curl http://x", "wget -O- x; curl x",
		// redirections do not hide the name
		">out rm x", "2>/dev/null rm x", "> out $CMD", "rm>out x",
		// broken syntax is refused
		"echo 'x", "echo \"x", "echo $(x", "echo `x", "echo ${x",
		// comments do not hide a later line
		"# x\nrm x",
	} {
		if d := Check(cmd, ps); d == nil {
			t.Errorf("Check(%q) = nil, want refused", cmd)
		}
	}
}

func TestAllowed(t *testing.T) {
	ps := pats(t, "rm", "git push", "curl")
	for _, cmd := range []string{
		"ls -la", "echo hello > out.txt", "cat a.txt | wc -l", "git status", "git pull", "echo $HOME",
		"echo \"$HOME\"", "x=1; echo $x", "grep -n 'TODO' *.go", "ls rm.sh", "echo rmdir", "mkdir -p a/b && cd a",
		"sh -c 'ls -la'", "bash -c \"echo hi\"", "eval echo hi", "echo $(date)", "echo `date`", "find . -name '*.go'",
		"env FOO=1 ls", "sudo ls", "true # rm in a comment", "echo a 2>&1", "ls ~", "git log --push",
		"python3 -c 'print(1)'", "for f in a b; do echo $f; done", "echo {}", "FOO=$(date) ls",
	} {
		if d := Check(cmd, ps); d != nil {
			t.Errorf("Check(%q) refused: %v", cmd, d)
		}
	}
	if d := Check("rm -rf /", nil); d != nil {
		t.Errorf("no patterns refused: %v", d)
	}
}

func TestDenialNamesThePattern(t *testing.T) {
	d := Check("echo ok; sudo rm -rf x", pats(t, "curl", "rm -rf"))
	if d == nil || d.Pattern != "rm -rf" || !strings.Contains(d.Error(), `"rm -rf"`) {
		t.Fatalf("denial %+v, want pattern rm -rf", d)
	}
	if d := Check("rm -r -f x", pats(t, "rm -rf")); d != nil {
		t.Errorf("rm -r -f matched rm -rf (words are exact): %v", d)
	}
	d = Check("$X y", pats(t, "rm"))
	if d == nil || d.Pattern != "" || !strings.Contains(d.Reason, "computed") {
		t.Fatalf("denial %+v, want a computed-name refusal", d)
	}
}

func TestCheckText(t *testing.T) {
	ps := pats(t, "rm", "curl")
	for _, src := range []string{"import os\nos.system('rm -rf x')", "subprocess.run(['/bin/rm','x'])", "fetch('x') // curl"} {
		if CheckText(src, ps) == nil {
			t.Errorf("CheckText(%q) = nil", src)
		}
	}
	for _, src := range []string{"print('hello')", "import os\nos.listdir('.')", "x = 'rmdir'"} {
		if d := CheckText(src, ps); d != nil {
			t.Errorf("CheckText(%q) refused: %v", src, d)
		}
	}
}

// FuzzCheck: the matcher never panics, and a command that mentions a
// denied program as a plain word (after any prefix that keeps it a
// separate simple command) is always refused.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"rm x", "sh -c 'r\"\"m'", "echo $(", "a=$'\\x72'", "`", "${", "\\", "'", "\"$(\"", "<(", "2>&1", "{a,b}", "$((1))", "0\\"} {
		f.Add(s)
	}
	ps := pats(f, "rm", "git push")
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > 4096 {
			return
		}
		_ = Check(cmd, ps)
		_ = CheckText(cmd, ps)
		// Whatever precedes it, "rm x" after a blank line is a command of
		// its own (one newline could be a backslash's line continuation)
		// unless an unclosed quote swallows it, which is refused too.
		if d := Check(cmd+"\n\nrm x", ps); d == nil {
			t.Fatalf("Check(%q + \"\\n\\nrm x\") = nil", cmd)
		}
	})
}

// BenchmarkCheck: a typical command and a 2,000-byte one (run_shell_command's
// limit is 2,048) against ten patterns.
func BenchmarkCheck(b *testing.B) {
	ps := pats(b, "rm", "git push", "curl", "wget", "dd", "mkfs", "shutdown", "reboot", "nc", "ssh")
	long := strings.Repeat(`echo "a $(date) b" | grep -v x && `, 57) + "ls"
	for name, cmd := range map[string]string{"short": "cd src && go test ./... 2>&1 | tail -5", "long": long} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(cmd)))
			for b.Loop() {
				if d := Check(cmd, ps); d != nil {
					b.Fatal(d)
				}
			}
		})
	}
}
