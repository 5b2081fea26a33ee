package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

// notLiteral lists the blocks annotated "run by" that
// TestDocBlocksRunLiterally does not run as written, keyed by file and the
// block's first line, each with the reason; the tests the annotation names
// run an equivalent. Every other "run by" block is run as written.
var notLiteral = map[string]string{
	"README.md: coordinator --store postgres://… --nats nats://…:4222 --addr :7420":                                      "starts the servers, with elided URLs",
	"README.md: rathctl token create --store \"$RATH_STORE\" --scope admin --name ops > ops.token   # the first token":   "needs a server with authentication on at the reader's URL (rath.example.com)",
	"README.md: rathctl run --agent coder.yaml --message \"fix it\" --sandbox docker        # or local, or docker:IMAGE": "coder.yaml is the reader's own spec",
	"BENCHMARKS.md: eval \"$(scripts/testpg.sh start)\"          # or any Postgres: an empty database":                   "starts a Postgres and benchmarks for minutes",
	"BENCHMARKS.md: eval \"$(scripts/testpg.sh start)\"           # the worker's store: a private Postgres":              "starts a Postgres and runs a Go test of a worker's heap under 1,000 sessions (TestWorkerHeap runs it)",
	"sandboxes.md: coordinator --sandbox-policy /etc/rath/sandbox-policy.yaml   # or RATH_SANDBOX_POLICY":                "starts the servers with the operator's policy file",
	"sandboxes.md: scripts/sandbox-image.sh           # builds rath-sandbox:busybox once":                                "builds a Docker image and starts a second rathctl dev",
	"security.md: # the operator, with database access: the first admin token":                                           "needs a server with authentication on at the reader's URL (rath.example.com)",
	"tools.md: coordinator --tools season_for          # or RATH_TOOLS=season_for,lookup":                                "starts a coordinator",
	"tools.md: rathctl approve RUN [--call ID] [--reason TEXT]":                                                          "a synopsis: [--call ID] is optional syntax, not a command",
}

// docBlock is one command block of the docs.
type docBlock struct {
	where string // file:line of the fence
	key   string // file and first line, the key of notLiteral
	body  []string
}

// runByBlocks returns the blocks of README.md and docs/*.md annotated
// "run by": those to run as written, and those notLiteral lists.
func runByBlocks(t *testing.T, root string) (literal, equivalent []docBlock) {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		for i := 1; i < len(lines); i++ {
			if !docFence.MatchString(lines[i]) {
				continue
			}
			a := docAnnotation.FindStringSubmatch(strings.TrimSpace(lines[i-1]))
			if a == nil || a[2] == "" {
				continue
			}
			b := docBlock{where: filepath.Base(f) + ":" + fmt.Sprint(i+1)}
			for j := i + 1; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
				b.body = append(b.body, lines[j])
			}
			if len(b.body) > 0 {
				b.key = filepath.Base(f) + ": " + b.body[0]
			}
			if _, ok := notLiteral[b.key]; ok {
				equivalent = append(equivalent, b)
			} else {
				literal = append(literal, b)
			}
		}
	}
	return literal, equivalent
}

var (
	heredocRE = regexp.MustCompile(`<<-?\s*'?([A-Za-z_]+)'?`)
	exitsRE   = regexp.MustCompile(`#.*\bexits (\d+)`)
	// placeholders are the docs' stand-ins for values of the reader's
	// own runs; a whole word equal to one becomes the shell variable of
	// that name, which the test sets from its fixture run and updates
	// from the block's own output (RUN from "run run_…").
	placeholders = map[string]string{
		"RUN": "RUN", "RUN_ID": "RUN", "VERSION": "VERSION", "A": "A", "B": "B",
		"STEP": "STEP", "M": "M", "<version-id>": "VERSION", "0193…": "VERSION",
	}
	// docServers are the addresses the docs give the coordinator; a
	// block's is the test's rathctl dev.
	docServers = []string{"http://127.0.0.1:7420", "http://localhost:7420"}
)

// codePart splits a doc line into its command and its trailing comment
// (the docs write comments after two or more spaces: "cmd   # why").
func codePart(line string) (code, comment string) {
	if strings.HasPrefix(strings.TrimSpace(line), "#") {
		return "", line
	}
	if i := strings.Index(line, "  #"); i >= 0 {
		return line[:i], line[i:]
	}
	return line, ""
}

// substitute replaces the placeholders and the docs' server address in a
// line's command part.
func substitute(line, server string) string {
	code, comment := codePart(line)
	for _, s := range docServers {
		code = strings.ReplaceAll(code, s, server)
	}
	words := strings.Split(code, " ")
	for i, w := range words {
		if v, ok := placeholders[w]; ok {
			words[i] = `"$` + v + `"`
		}
	}
	return strings.Join(words, " ") + comment
}

// blockScript turns a doc block into a bash script that runs each of its
// commands as written (after substitute), checks each one's exit status
// (0, or the N of a "# exits N" comment), prints its output, and takes RUN
// from it. The command that starts the server (`rathctl dev`, `go run
// ./cmd/rathctl dev`) is the test's own rathctl dev and is not run again.
func blockScript(b docBlock, server string) (script string, skipped []string) {
	var s strings.Builder
	s.WriteString("set -u\n")
	lines := b.body
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		code, _ := codePart(line)
		if strings.TrimSpace(code) == "" {
			continue
		}
		cmd := []string{substitute(line, server)}
		for strings.HasSuffix(strings.TrimRight(code, " "), "\\") && i+1 < len(lines) {
			i++
			code, _ = codePart(lines[i])
			cmd = append(cmd, substitute(lines[i], server))
		}
		if m := heredocRE.FindStringSubmatch(code); m != nil {
			for i+1 < len(lines) {
				i++
				cmd = append(cmd, lines[i])
				if strings.TrimSpace(lines[i]) == m[1] {
					break
				}
			}
		}
		first, _ := codePart(cmd[0])
		switch f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(first), "&")); {
		case strings.Join(f, " ") == "go run ./cmd/rathctl dev" || strings.Join(f, " ") == "rathctl dev":
			skipped = append(skipped, strings.TrimSpace(first))
			continue
		case len(f) > 0 && f[0] == "export":
			// The environment of the commands after it.
			fmt.Fprintf(&s, "%s\n", strings.Join(cmd, "\n"))
			continue
		}
		want := "0"
		if m := exitsRE.FindStringSubmatch(strings.Join(cmd, "\n")); m != nil {
			want = "0|" + m[1]
		}
		quoted, _ := json.Marshal(strings.Join(cmd, "\n"))
		fmt.Fprintf(&s, "__out=$(\n%s\n)\n__rc=$?\nprintf '%%s\\n' \"$__out\"\n", strings.Join(cmd, "\n"))
		fmt.Fprintf(&s, "case $__rc in %s) ;; *) printf 'docs-block: exit %%s: %%s\\n' \"$__rc\" %s >&2; exit 1;; esac\n", want, shellQuote(string(quoted)))
		s.WriteString("__r=$(printf '%s\\n' \"$__out\" | sed -n 's/^run \\(run_[^ ]*\\).*/\\1/p' | head -n1)\n")
		s.WriteString("if [ -n \"$__r\" ]; then RUN=$__r; fi\n")
	}
	return s.String(), skipped
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// literalFixture is the history the blocks' placeholders point at: a
// workflow run of two agents with the built-in tools. The first writes
// notes/todo.txt and kyoto/plan.md; the second changes the todo list.
const literalFixture = `version: 1
name: docs-fixture
agents:
  scribe:
    model: scripted
    tools: [builtin]
    script:
      - content: "Writing the plan."
        tool_calls:
          - function: {name: write_workspace_file, arguments: {path: kyoto/plan.md, content: "Day 1: Fushimi Inari.\n"}}
          - function: {name: write_workspace_file, arguments: {path: notes/todo.txt, content: "book the ryokan\n"}}
      - "The plan and the todo list are saved."
  checker:
    model: scripted
    tools: [builtin]
    script:
      - unused
      - unused
      - content: "Ticking it off."
        tool_calls:
          - function: {name: write_workspace_file, arguments: {path: notes/todo.txt, content: "book the ryokan (done)\n"}}
      - "Done."
steps:
  - agent: scribe
  - agent: checker
`

// TestDocBlocksRunLiterally runs every doc block annotated "run by" as
// written, except those notLiteral lists with a reason, against a
// `rathctl dev` it starts from the repository root: bash runs each command
// of a block with rathctl (and `go run ./cmd/rathctl`, the same program
// prebuilt) on PATH, RATH_SERVER set, OPENAI_BASE_URL a fake OpenAI
// endpoint (memory commit --extract's model), a HOME of its own (with
// OpenRath's transcripts in ~/.openrath/sessions), in a directory where
// examples/ and scripts/ are the repository's (the repository root for a
// block that says it runs there). The docs' placeholders (RUN, VERSION, A,
// B, STEP, M) are the values of a fixture workflow run, RUN then the run a
// command of the block printed; the docs' server address is the test's.
// Every command must exit 0, or with the code its comment says
// ("# exits 3").
func TestDocBlocksRunLiterally(t *testing.T) {
	t.Parallel()
	root := repoPath(t, ".")
	blocks, equivalent := runByBlocks(t, root)
	if len(blocks) < 5 {
		t.Fatalf("only %d blocks to run: is the annotation parsed?", len(blocks))
	}
	listed := map[string]bool{}
	for _, b := range equivalent {
		listed[b.key] = true
	}
	for k := range notLiteral {
		if !listed[k] {
			t.Errorf("notLiteral names %q, which is no \"run by\" block's first line: update the list", k)
		}
	}
	dir := t.TempDir()
	p := &proc{name: "rathctl", args: []string{"dev", "--addr", "127.0.0.1:0", "--dir", filepath.Join(dir, "state")},
		env: []string{"RATH_SERVER=", "RATH_STORE=", "RATH_TOKEN="}, log: filepath.Join(dir, "dev.log"),
		// From the repository root, as the docs start it: an MCP server's
		// command (./bin/mcpserver) is relative to it.
		dir: root}
	p.start(t)
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("--- rathctl dev output:\n%s", tail(p.output(), 4000))
		}
	})
	addr := regexp.MustCompile(`coordinator API on (http://\S+)`)
	var server string
	testenv.Eventually(t, 60*time.Second, "rathctl dev prints its address", func() bool {
		if m := addr.FindStringSubmatch(p.output()); m != nil {
			server = m[1]
			return true
		}
		return !p.running()
	})
	if server == "" {
		t.Fatalf("rathctl dev exited: %s", p.output())
	}

	// PATH: rathctl, and a go that runs it for `go run ./cmd/rathctl`.
	binPath := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binPath, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin(t, "rathctl"), filepath.Join(binPath, "rathctl")); err != nil {
		t.Fatal(err)
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	goShim := "#!/bin/sh\nif [ \"$1\" = run ] && [ \"$2\" = ./cmd/rathctl ]; then shift 2; exec rathctl \"$@\"; fi\nexec " + realGo + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(binPath, "go"), []byte(goShim), 0o755); err != nil {
		t.Fatal(err)
	}
	// The model of memory commit --extract: a fake OpenAI endpoint that
	// answers every request with one memo.
	llm := llmtest.NewServer(t)
	llm.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: `["Prefers a dark theme at night."]`}
	})
	fixtures := testenv.OpenRathFixtures(t)
	env := []string{"PATH=" + binPath + string(os.PathListSeparator) + os.Getenv("PATH"),
		"RATH_SERVER=" + server, "KEY=sk-docs-test", "OPENAI_API_KEY=sk-docs-test", "OPENAI_BASE_URL=" + llm.URL(),
		"GOFLAGS=" + os.Getenv("GOFLAGS"), "GOCACHE=" + goEnv(t, "GOCACHE"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE")}
	// newHome is a block's HOME: its own (a config file one block writes
	// is not another's), with OpenRath's transcripts in ~/.openrath.
	newHome := func(name string) string {
		home := filepath.Join(dir, "home-"+name)
		if err := os.MkdirAll(filepath.Join(home, ".openrath"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(fixtures, "sessions"), filepath.Join(home, ".openrath", "sessions")); err != nil {
			t.Fatal(err)
		}
		return home
	}

	// The fixture run the placeholders name.
	fixture := filepath.Join(dir, "fixture.yaml")
	if err := os.WriteFile(fixture, []byte(literalFixture), 0o600); err != nil {
		t.Fatal(err)
	}
	env0 := append(slices.Clone(env), "HOME="+newHome("fixture"))
	out := runSh(t, dir, env0, "rathctl run "+fixture+" --message 'Plan Kyoto' -o json")
	var submitted fixtureRun
	if err := json.Unmarshal([]byte(out), &submitted); err != nil || submitted.ID == "" {
		t.Fatalf("rathctl run: %v %q", err, out)
	}
	run := waitRunJSON(t, dir, env0, submitted.ID)
	vars := map[string]string{"RUN": run.ID, "VERSION": run.Output, "A": run.Steps[0].Output, "B": run.Output, "STEP": "2", "M": "scripted"}
	t.Logf("fixture: %v", vars)

	for _, b := range blocks {
		name := strings.NewReplacer(":", "-", ".", "-").Replace(b.where)
		work := filepath.Join(dir, "work-"+name)
		if strings.Contains(strings.Join(b.body, "\n"), "# from the repository root") {
			// The block says where it runs (it builds bin/mcpserver
			// there, which the repository ignores).
			work = root
		} else {
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{"examples", "scripts"} {
				if err := os.Symlink(filepath.Join(root, d), filepath.Join(work, d)); err != nil {
					t.Fatal(err)
				}
			}
		}
		script, skipped := blockScript(b, server)
		benv := append(slices.Clone(env), "HOME="+newHome(name))
		for k, v := range vars {
			benv = append(benv, k+"="+v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = work, benv
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s, run as written: %v\n--- script:\n%s\n--- stdout:\n%s\n--- stderr:\n%s", b.where, err, script, tail(stdout.String(), 3000), tail(stderr.String(), 3000))
			continue
		}
		if len(skipped) > 0 {
			t.Logf("%s: ran; %q is this test's rathctl dev", b.where, skipped)
		} else {
			t.Logf("%s: ran", b.where)
		}
	}
	if len(llm.Requests()) == 0 {
		t.Error("no block called the fake model: memory commit --extract did not run")
	}
	t.Logf("%d \"run by\" doc blocks run as written; %d run as an equivalent (notLiteral)", len(blocks), len(equivalent))
}

// fixtureRun is what the test reads of the fixture run.
type fixtureRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Output string `json:"output"`
	Steps  []struct {
		Output string `json:"output"`
	} `json:"steps"`
}

func waitRunJSON(t *testing.T, dir string, env []string, id string) fixtureRun {
	t.Helper()
	var r fixtureRun
	testenv.Eventually(t, 60*time.Second, "the fixture run ends", func() bool {
		out := runSh(t, dir, env, "rathctl runs show "+id+" -o json")
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("runs show: %v %q", err, out)
		}
		return r.Status == "succeeded" || r.Status == "failed"
	})
	if r.Status != "succeeded" || len(r.Steps) != 2 || r.Output == "" {
		t.Fatalf("fixture run %+v", r)
	}
	return r
}

func runSh(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s%s", script, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
