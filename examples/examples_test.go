// Package examples_test runs every example of the ladder (examples/NN_name)
// offline, exactly as its README says: the command is the fenced sh block
// after the README's "<!-- offline -->" marker, run with bash from the
// repository root, so README and test cannot drift. Each example's output
// is then checked against what that example is meant to show.
//
// The examples start their own throwaway `rathctl dev` (examples/lib.sh);
// the test only hands them one prebuilt rathctl (RATHCTL) so the ladder
// does not rebuild it once per example (and RATH_BIN, the coordinator, worker
// and natsd of the examples that start the system as separate processes),
// and clears RATH_SERVER, RATH_STORE, RATH_TOKEN, RATH_MODEL, the OPENAI_*
// variables and the like so nothing of the caller's environment leaks in.
// Example 05 is a Go module of its own; its run.sh builds it, so this test
// proves that a module outside this one can build a worker with its tools.
package examples_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
)

// want lists, per example, patterns its output must match, in order: each
// pattern must match after the previous one's match. A new example with no
// entry here fails the test, so every example is checked.
var want = map[string][]string{
	"01_hello": {
		`run run_\S+`,
		`step\.started`,
		`(?m)^Hello! I am a Rath agent`, // the streamed content, before the commit
		`step\.committed`,
		`run run_\S+ succeeded`,
		`usage prompt=\d+ completion=19 total=\d+`,
		`answer: Hello! I am a Rath agent`,
	},
	"02_lineage": {
		`(?m)^\S+ +create +len=2$`,
		`(?m)^\S+ +append +len=3 +parents=`,
		`(?m)^\S+ +fork +len=3 +parents=`,
		`(?m)^\S+ +merge +len=5 +parents=\S+,\S+$`,
		`(?m)^ +2 +assistant: Day 1: Fushimi Inari\.\n +3 +user: Add a temple\.\n +4 +user: Add a market\.$`,
		`v1 -->\|fork\| v2`,
		`v3 -->\|merge\| v5`,
		`v4 -\.->\|merge\| v5`,
		`(?m)^2 +assistant +\S+ +append .*Day 1: Fushimi Inari\.$`,
		`(?m)^4 +user +\S+ \(via merge\) +append .*Add a market\.$`,
		`(?m)^\S+ +detach +len=5$`,
		`ancestors of the detached version: 0`,
		`ancestors of the merge: 5`,
	},
	"03_sandboxes": {
		`== the where agent on the local sandbox`,
		`run run_\S+ succeeded`,
		`tool_result: run_shell_command .*"stdout":"cwd=/tmp/\S*rath-ws-`,
		`== the where agent on the docker sandbox`,
		`run run_\S+ succeeded`,
		`tool_result: run_shell_command .*"stdout":"cwd=/workspace host=[0-9a-f]{12}`,
	},
	"04_builtin_tools": {
		`run run_\S+ succeeded`,
		`write_workspace_file .*"bytes_written":87`,
		`workspace_path_exists .*"ok":true`,
		`list_workspace_files .*"path":"src/fizz.sh"`,
		`read_workspace_file .*"data":"for i in`,
		`run_shell_command .*"exit_code":0,"stdout":"1 2 fizz 4 5 "`,
		`run_code .*"stdout":"lines=5\\n"`,
		`read_workspace_file .*"error_kind":"file_not_found"`,
		`(?m)^-rw-r--r-- +87  src/fizz.sh$`,
		`(?m)^for i in 1 2 3 4 5`,
	},
	"05_custom_tool": {
		`built customworker from examples/05_custom_tool \(example\.com/customworker\)`,
		`# worker custom started`,
		`typo\.yaml:7:9: tools\[0\]: unknown tool "season_fro" \(the workers offer: .*season_for`,
		`exit 2`,
		`step\.started +\{"attempt":1,"worker":"custom"\}`,
		`step\.tool_call +season_for \{"month":4\}`,
		`step\.tool_result season_for ok`,
		`run run_\S+ succeeded`,
		`tool_result: season_for \(call_0_0\) → \{"known_for":"Cherry blossoms along the Philosopher's Path","month":4,"season":"spring"\}`,
		`tool_result: season_for \(call_0_1\) → \{"known_for":"Red maples at Tofuku-ji","month":11,"season":"autumn"\}`,
	},
	"06_mcp_tool": {
		`built bin/mcpserver`,
		`step\.tool_call +demo__echo \{"text":"hi from MCP"\}`,
		`step\.tool_result demo__fail failed: tool_execution_exception`,
		`run run_\S+ succeeded`,
		`tool_result: demo__echo \(call_0_0\) → \{"text":"hi from MCP"\}`,
		`tool_result: demo__lines \(call_0_1\) → \{"text":"first\\nsecond"\}`,
		`tool_result: demo__fail \(call_1_0\) → \{"error_kind":"tool_execution_exception","message":"disk on fire","ok":false\}`,
	},
	"07_budget": {
		`(?m)^Counting to five, one number per round\. One\.$`,
		`step\.tool_result run_shell_command ok`,
		`(?m)^Four\.$`,
		`(?m)^Five\.$`,
		`step\.committed .*"stop":"run_tokens"`,
		`run run_\S+ succeeded`,
		`answer: Five\.`,
		`call call_4_0 run_shell_command\(\{"cmd":"echo 5"\}\)`,
		`"error_kind":"budget_exceeded","message":"not run: the run's token budget is spent: used \d+ of 150"`,
		`note: \{"budget":"run_tokens","event":"budget\.exceeded","limit":150`,
	},
	"08_compress": {
		`(?m)^Kyoto notes\.`,
		`run run_\S+ succeeded`,
		`answer: Plan: Fushimi Inari at 6:30`,
		`(?m)^ +0 +summary: \{"content":"Summary: visit Fushimi Inari before 7am`,
		`(?m)^ +1 +assistant: Plan:`,
		`(?m)^ +1 +\S+ +compress len=1$`,
		`(?m)^ +2 +\S+ +step +len=2$`,
		`(?m)^ +3 +\S+ +create +len=1$`,
		`step · researcher`,
		`compress · squash`,
		`step · planner`,
		`v1 -->\|compress\| v2`,
	},
	"09_memory": {
		`step\.memory_commit .*"ok":true`,
		`run run_\S+ succeeded`,
		`remembered memory://user/preferences/seat \(31 bytes\) in default`,
		`(?m)^memory://session/\S+/transcript +\S+ +\S+ +user: My favorite color is teal\.`,
		`(?m)^memory://user/preferences/seat +\S+ +\S+ +The user prefers a window seat\.$`,
		`# rathctl dev stopped`,
		`(?m)^[0-9.]+ +memory://session/\S+/transcript +\S+ +user: My favorite color is teal\.`,
		`(?m)^ +1 +memory_recall: \{"hits":\[\{"score":[0-9.]+,"snippet":"user: My favorite color is teal\.`,
		`"snippet":"The user prefers a window seat\."`,
		`"query":"What is my favorite color, and which seat do I like\?","store":"local"`,
		`(?m)^ +2 +assistant: Your favorite color is teal, and you like a window seat\.$`,
		`committed memory://session/\S+/transcript \(\d+ bytes\) in default`,
	},
	"10_providers": {
		`fake endpoints at http://127\.0\.0\.1:\d+/small/v1 and http://127\.0\.0\.1:\d+/large/v1`,
		`(?m)^default_provider: small$`,
		`(?m)^ +base_url: http://127\.0\.0\.1:\d+/large/v1$`,
		`== the review workflow on the small provider`,
		`default provider is now small`,
		`(?m)^\[small endpoint, model gpt-4o-mini\] You asked: "Name a good month to visit Kyoto\."$`,
		`run run_\S+ succeeded`,
		`answer: \[small endpoint, model gpt-4o-mini\]`,
		`== the review workflow on the large provider`,
		`default provider is now large`,
		`(?m)^\[large endpoint, model gpt-4o-mini\] You asked:`,
		`run run_\S+ succeeded`,
		`answer: \[large endpoint, model gpt-4o-mini\]`,
	},
	"11_selector": {
		`step\.committed +\{"choice":0,`,
		`(?m)^The duplicate charge of 42\.00 EUR was refunded\.$`,
		`step\.committed +\{"choice":1,`,
		`step\.committed +\{"choice":-1,`,
		`run run_\S+ succeeded`,
		`answer: We refunded the duplicate charge`,
		`(?m)^ +1 +selector_decision: .*"choice":0,.*"selector":"router"`,
		`(?m)^ +2 +assistant: The duplicate charge`,
		`(?m)^ +3 +selector_decision: .*"choice":1,`,
		`(?m)^ +4 +assistant: We refunded`,
		`(?m)^ +5 +selector_decision: .*"choice":-1,`,
	},
	"12_fanout": {
		`# worker worker-c started`,
		`Temples: Kiyomizu-dera at sunset`, // parallel branches stream onto the same lines
		`run run_\S+ succeeded`,
		`answer: Plan: morning at Kinkaku-ji`,
		`(?m)^run_\S+/1\.b\d\.1 +committed +1 +worker-[abc] `,
		`(?m)^run_\S+/2 +committed +1 +worker-[abc] `,
		`distinct workers: worker-a worker-b worker-c \n`, // every branch on its own process
		`(?m)^ +1 +assistant: Temples:.*\n +2 +assistant: Food:.*\n +3 +assistant: Walks:.*\n +4 +assistant: Plan:`,
		`v0 -->\|fork\| v1`,
		`v0 -->\|fork\| v3`,
		`-->\|merge\| v8`,
		`v8 --> v9`,
	},
	"13_durable": {
		`# worker worker-b started`,
		`(?m)^status +pending$`,
		`(?m)^status +running$`,
		`(?m)^run_\S+/1 +running +1 +worker-[ab] `,
		`killed the coordinator \(pid \d+\) with SIGKILL`,
		`# coordinator http://127\.0\.0\.1:\d+ \(pid \d+\)`,
		`run run_\S+ succeeded`,
		`answer: Final: a morning at Kinkaku-ji`,
		`(?m)^status +succeeded$`,
		`(?m)^run_\S+/1 +committed +1 +worker-[ab] +\S+ *\n\S+/2 +committed +1 +worker-[ab] +\S+ *\nrun_\S+/3 +committed +1 +worker-[ab] `,
		`step versions in the run: 3\n`,
	},
	"14_approval": {
		`step\.approval_pending .*"name":"run_shell_command"`,
		`run run_\S+ waiting`,
		`rathctl run exited 3`,
		`(?m)^status +waiting$`,
		`(?m)^approved +call_0_0 +run_shell_command`,
		`approval\.decided .*"decision":"approved"`,
		`step\.tool_call +run_shell_command \{"cmd":"echo tagged v1\.2\.3"\}`,
		`step\.tool_result run_shell_command ok`,
		`run run_\S+ succeeded`,
		`answer: Release v1\.2\.3 is tagged\.`,
	},
	"15_rerun": {
		`answer: Lanterns on the river`,
		`answer: Red gates, / dusk on the river\.`,
		`forked \S+ at \S+`,
		`1/3 ran step`,
		`2/3 appended append`,
		`3/3 ran step`,
		`rerun of \S+ from \S+: fork \S+, new head \S+`,
		`(?m)^\S+ +\S+ +step +ran +run_\S+ +poet +scripted$`,
		`(?m)^\S+ +\S+ +append +appended +- +- +-$`,
		`== the new branch`,
		`(?m)^ +1 +assistant: Moss on old stone steps`,
		`(?m)^ +2 +user: Shorter, please\.$`,
		`(?m)^ +3 +assistant: Temple bell, / tea steam\.$`,
		`== the original, unchanged`,
		`(?m)^ +1 +assistant: Lanterns on the river`,
		`(?m)^ +3 +assistant: Red gates, / dusk on the river\.$`,
		`v0 -->\|fork\| v4`,
		`v6 --> v7`,
		`== a workflow run the coordinator drives`,
		`answer: Red gates, / dusk on the river\.`,
		`rerun of run run_\S+ from step 2: new run run_\S+ \(1 steps kept\)`,
		`answer: Temple bell, / tea steam\.`,
		`(?m)^ +1 +assistant: Lanterns on the river`, // the kept draft
		`(?m)^ +2 +assistant: Temple bell, / tea steam\.$`,
		`step 1 kept: both runs' step 1 output is \S+`,
	},
	"16_replay_verify": {
		`step\.tool_result write_workspace_file ok`,
		`step\.tool_result run_shell_command ok`,
		`run run_\S+ succeeded`,
		`replay of run run_\S+: output \S+, replay \S+, identical=true`,
		`(?m)^1 +agent +\S+ +\S+ +6 +true +-$`, // the scribe's step: its tool results from the recording
		`(?m)^2 +agent +\S+ +\S+ +3 +true +-$`, // the checker's
		`verified 3 versions, 10 chunks: ok`,   // the run's output
		`verified 3 versions, 10 chunks: ok`,   // the replay's: the same input, its own two steps
		`verified 5 versions, 19 chunks: ok`,   // --all: the replay's versions too
	},
	"17_dossier": {
		`run run_\S+ succeeded`,
		`# Evidence dossier: run run_`,
		`### write_workspace_file .call_0_0. \(scribe`,
		`### run_shell_command .call_1_2.`,
		`## Workspace changes`,
		`\| scribe \| scripted \| trunk \| 1 \| 138 \| 60 \| 198 \| 0\.000057 \|`,
		`Output hash: .[0-9a-f]{64}.`,
		`The hash chain verifies: 2 versions and 8 chunks`,
		`dossier\.html: \d+ bytes, 1 graph\(s\)`,
	},
	"18_training_data": {
		`task 01: run run_\S+ succeeded`,
		`task 20: run run_\S+ succeeded`,
		`/1\.b2\.2 +committed`,
		`1\.b0\.2: .*"rath_label":\{"by":"verifier","note":"exit 0, score from stdout","score":1\}`,
		`1\.b1\.2: .*"rath_label":\{"by":"verifier","note":"exit 0, score from stdout","score":0\.25\}`,
		`1\.b2\.2: .*"rath_label":\{"by":"verifier","note":"exit 1","score":0\}`,
		`exported 60 records \(0 skipped`,
		`exported 60 pairs from 60 labeled trajectory ends`,
		`sft\.jsonl: 60 records; pairs\.jsonl: 60 pairs`,
		`sft\.jsonl: 60 SFT records, 200 messages, all valid`,
		`pairs\.jsonl: 60 DPO pairs, all valid \(by source: map\[scores:60\]\)`,
		`verified 80 distinct versions named by the records and pairs`,
	},
}

// needsDocker lists the examples that need a Docker Engine; they follow the
// module's Docker gate (testenv.RequireDocker: skipped without an Engine,
// failed instead under RATH_REQUIRE_DOCKER=1 or CI=true). Their run.sh
// builds the sandbox image itself.
var needsDocker = map[string]bool{"03_sandboxes": true}

func TestExamples(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob(filepath.Join(root, "examples", "[0-9][0-9]_*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no examples/NN_* directories")
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		seen[filepath.Base(d)] = true
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("want has %s, but examples/%s does not exist", name, name)
		}
	}

	// The programs the examples start, built once (examples/lib.sh builds
	// them itself when RATHCTL and RATH_BIN are not set).
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"./cmd/rathctl", "./cmd/coordinator", "./cmd/worker", "./e2e/natsd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	sort.Strings(dirs)
	for _, d := range dirs {
		name := filepath.Base(d)
		t.Run(name, func(t *testing.T) {
			if needsDocker[name] {
				testenv.RequireDocker(t)
			}
			patterns, ok := want[name]
			if !ok {
				t.Fatalf("examples/%s has no expectations in examples_test.go's want", name)
			}
			readme, err := os.ReadFile(filepath.Join(d, "README.md"))
			if err != nil {
				t.Fatalf("examples/%s: %v", name, err)
			}
			command, err := offlineCommand(string(readme))
			if err != nil {
				t.Fatalf("examples/%s/README.md: %v", name, err)
			}
			out := runExample(t, root, bin, command)
			checkOutput(t, out, patterns)
		})
	}
}

// offlineCommand returns the fenced sh block that follows the README's
// "<!-- offline -->" marker.
func offlineCommand(readme string) (string, error) {
	_, after, ok := strings.Cut(readme, "<!-- offline -->")
	if !ok {
		return "", errors.New("no <!-- offline --> marker")
	}
	after = strings.TrimLeft(after, " \t\r\n")
	body, ok := strings.CutPrefix(after, "```sh\n")
	if !ok {
		return "", errors.New("the <!-- offline --> marker is not followed by a ```sh block")
	}
	block, _, ok := strings.Cut(body, "```")
	if !ok {
		return "", errors.New("the offline ```sh block is not closed")
	}
	if strings.TrimSpace(block) == "" {
		return "", errors.New("the offline ```sh block is empty")
	}
	return block, nil
}

func runExample(t *testing.T, root, bin, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = root
	cmd.Env = cleanEnv(bin, t.TempDir())
	// Its own process group, so a timeout stops the dev stack or cluster
	// the example started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	t.Logf("$ %s\n%s", strings.TrimSpace(command), out.String())
	if err != nil {
		t.Fatalf("%s: %v (output above)", strings.TrimSpace(command), err)
	}
	return out.String()
}

func cleanEnv(bin, home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "RATH_SERVER", "RATH_STORE", "RATH_TOKEN", "RATH_MODEL", "RATH_HOME", "RATHCTL", "RATH_BIN", "RERUN_MODEL",
			"SMALL_BASE_URL", "LARGE_BASE_URL", "PROVIDER_API_KEY_ENV",
			"OPENAI_API_KEY", "OPENAI_BASE_URL":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "RATHCTL="+filepath.Join(bin, "rathctl"), "RATH_BIN="+bin, "RATH_HOME="+home)
}

// checkOutput requires every pattern to match, each after the previous.
func checkOutput(t *testing.T, out string, patterns []string) {
	t.Helper()
	rest := out
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		loc := re.FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("output does not match %q after the previous expectation; the rest was:\n%s", p, rest)
		}
		rest = rest[loc[1]:]
	}
}

// TestOfflineCommand: the README parser takes the sh block right after the
// marker and refuses a README without one, so an example cannot silently
// run nothing.
func TestOfflineCommand(t *testing.T) {
	got, err := offlineCommand("# x\n\n```sh\nnot this\n```\n<!-- offline -->\n```sh\nexamples/01_hello/run.sh\n```\n\n```sh\nnor this\n```\n")
	if err != nil || got != "examples/01_hello/run.sh\n" {
		t.Fatalf("offlineCommand = %q, %v", got, err)
	}
	for _, bad := range []string{
		"no marker\n```sh\nx\n```\n",
		"<!-- offline -->\ntext first\n```sh\nx\n```\n",
		"<!-- offline -->\n```sh\nx\n",
		"<!-- offline -->\n```sh\n  \n```\n",
	} {
		if got, err := offlineCommand(bad); err == nil {
			t.Errorf("offlineCommand(%q) = %q, want an error", bad, got)
		}
	}
}
