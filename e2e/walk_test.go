package e2e

// The user's walk (issue 20, "Done when"): every rathctl command that
// README.md and docs/ mention, run in order by a user who has only a
// coordinator URL and a token (RATH_SERVER, RATH_TOKEN, a HOME of their own
// and PATH: no RATH_STORE, no database URL), against a deployment of
// separate processes on Postgres with auth on, and against `rathctl dev`.
// Each step asserts its output; later steps use ids earlier ones printed.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rath-run/rath/internal/testenv"
)

// walkExempt are the documented commands the walk does not run, each with
// the reason it cannot be walked against a cluster. Nothing else may be
// exempt.
var walkExempt = map[string]string{
	"dev":                    "starts a deployment (in process); the walk runs against one instead (TestWalkDev)",
	"demo":                   "starts its own in-process dev stack",
	"migrate":                "an operator's schema migration: needs the database URL the walk must not have",
	"bench":                  "a load test (minutes of load with the limits), not one step of a walk; TestBenchAgainstACluster runs it against a cluster",
	"config":                 "local: edits the model providers of the user's config file",
	"config path":            "local: prints the config file's path",
	"config show":            "local: prints the config file",
	"config use":             "local: edits the config file",
	"config set-provider":    "local: edits the config file",
	"config remove-provider": "local: edits the config file",
	"completion":             "local: prints cobra's shell completion script",
}

// walkStep is one command of the walk. Strings in args, stdin, env, want,
// notWant, wantErr and json values may name variables as {name}: the
// deployment's (server, fixtures, agent files) or ones captured by earlier
// steps.
type walkStep struct {
	name  string
	args  []string
	stdin string
	// as is the variable holding the step's RATH_TOKEN; "" runs without
	// RATH_TOKEN (the token `rathctl login` stored, if any).
	as string
	// server, when set, is the step's RATH_SERVER instead of the
	// deployment's.
	server string
	code   int
	// want and notWant are substrings of stdout; wantErr of stderr.
	want, notWant, wantErr []string
	// json asserts fields of stdout read as JSON: a dotted path (array
	// elements by index) and its value; "*" is any non-empty, non-zero
	// value, "#N" an array of N elements.
	json map[string]string
	// capture stores values for later steps: a JSON path of stdout, "re:"
	// and a regular expression whose first group is the value (matched
	// against stdout), or "stdout" for all of it.
	capture map[string]string
	// check is any further assertion; it may set variables.
	check func(w *walker, out string) error
}

// walkFiles are the files the walk's steps read, by variable name.
var walkFiles = map[string]string{
	"echo.yaml": "name: echo\nmodel: scripted\nscript:\n  - content: walked every step\n",
	// A reply that takes a minute: the run to cancel.
	"slow.yaml": "name: slow\nmodel: scripted\nscript:\n  - content: too late\n    delay_ms: 60000\n",
	// Its one tool call waits for a human: approve, then reject.
	"scribe.yaml": `name: scribe
model: scripted
tools: [builtin]
approve: [write_workspace_file]
script:
  - tool_calls: [{id: w1, function: {name: write_workspace_file, arguments: {path: notes/todo.txt, content: "walk every command"}}}]
  - content: saved the notes
`,
	// rerun --model scripted:FILE: the replies of the re-executed step.
	"rerun-replies.yaml": "- content: walked it again\n",
}

// walkSteps is the walk in order. dev is true against `rathctl dev`, which
// runs without auth and without a token store.
func walkSteps(dev bool) []walkStep {
	var steps []walkStep
	add := func(s ...walkStep) { steps = append(steps, s...) }

	// Identity and tokens.
	if dev {
		add(
			walkStep{name: "login", args: []string{"login"}, stdin: "any-token\n",
				want: []string{"logged in to {server} as anonymous", "scope admin"}},
			walkStep{name: "login: runs list with the stored login", args: []string{"runs", "list"}, want: []string{"RUN"}},
			walkStep{name: "token create (dev has no token store)", args: []string{"token", "create", "--scope", "read"}, code: 1,
				wantErr: []string{"no token store"}},
			walkStep{name: "token list (dev has no token store)", args: []string{"token", "list"}, code: 1,
				wantErr: []string{"no token store"}},
			walkStep{name: "token revoke (dev has no token store)", args: []string{"token", "revoke", "tok_0123456789abcdef"}, code: 1,
				wantErr: []string{"no token store"}},
		)
	} else {
		add(
			walkStep{name: "login", args: []string{"login"}, stdin: "{bootstrap}\n",
				want: []string{"logged in to {server}", "scope admin"}},
			walkStep{name: "login: runs list with the stored login", args: []string{"runs", "list"}, want: []string{"RUN"}},
			walkStep{name: "token create admin@acme", as: "bootstrap",
				args:    []string{"token", "create", "--scope", "admin", "--tenant", "acme", "--name", "walk-admin", "-o", "json"},
				json:    map[string]string{"scope": "admin", "tenant": "acme", "name": "walk-admin", "token": "*"},
				capture: map[string]string{"admin": "token"}},
			walkStep{name: "token create submit@acme", as: "admin",
				args:    []string{"token", "create", "--scope", "submit", "--name", "walk-submit", "--ttl", "720h", "-o", "json"},
				json:    map[string]string{"scope": "submit", "tenant": "acme", "expires_at": "*"},
				capture: map[string]string{"submit": "token"}},
			walkStep{name: "token create read@acme (text)", as: "admin",
				args:    []string{"token", "create", "--scope", "read", "--name", "walk-read"},
				wantErr: []string{"tenant acme, scope read", "not shown again"},
				capture: map[string]string{"read": `re:^(\S+)\n`}},
			walkStep{name: "token create (to revoke)", as: "admin",
				args:    []string{"token", "create", "--scope", "read", "--name", "walk-doomed", "-o", "json"},
				capture: map[string]string{"doomed": "token", "doomedID": "id"}},
			walkStep{name: "token list", as: "admin", args: []string{"token", "list"},
				want: []string{"walk-admin", "walk-submit", "walk-read", "walk-doomed", "{doomedID}"}, notWant: []string{"{submit}"}},
			walkStep{name: "token revoke", as: "admin", args: []string{"token", "revoke", "{doomedID}"},
				want: []string{"revoked {doomedID} (tenant acme, scope read)"}},
			walkStep{name: "token revoke: the revoked token is refused", as: "doomed", args: []string{"runs", "list"}, code: 1,
				wantErr: []string{"401"}},
			walkStep{name: "a read token cannot write", as: "read", args: []string{"session", "new", "--user", "x"}, code: 1,
				wantErr: []string{"403"}},
		)
	}

	// Sessions.
	add(
		walkStep{name: "session new", as: "submit",
			args:    []string{"session", "new", "--system", "You are brief.", "--user", "hello walk: " + walkLong, "-o", "json"},
			json:    map[string]string{"op": "create", "len": "2", "hash": "*"},
			capture: map[string]string{"root": "id"}},
		walkStep{name: "session new (text)", as: "submit", args: []string{"session", "new", "--user", "a second root"},
			capture: map[string]string{"root2": `re:^(\S+)\s+create\s+len=1`}},
		walkStep{name: "session append", as: "submit",
			args:    []string{"session", "append", "{root}", "--user", "one more thing", "-o", "json"},
			json:    map[string]string{"op": "append", "len": "3", "parents.0": "{root}"},
			capture: map[string]string{"app": "id"}},
		walkStep{name: "session show", as: "read", args: []string{"session", "show", "{app}"},
			want: []string{"{app}  append  len=3", "system: You are brief.", "user: hello walk: " + walkLong, "user: one more thing"}},
		walkStep{name: "session show (not found)", as: "read", args: []string{"session", "show", "01a21956-0000-7000-8000-000000000000"}, code: 4,
			wantErr: []string{"not found"}},
		walkStep{name: "session log", as: "read", args: []string{"session", "log", "{app}"},
			want: []string{"1  {root}  create"}},
		walkStep{name: "session fork", as: "submit", args: []string{"session", "fork", "{root}", "-o", "json"},
			json: map[string]string{"op": "fork", "len": "2", "parents.0": "{root}"}, capture: map[string]string{"fork": "id"}},
		walkStep{name: "session append (on the fork)", as: "submit",
			args:    []string{"session", "append", "{fork}", "--assistant", "the other branch", "-o", "json"},
			capture: map[string]string{"branch": "id"}},
		walkStep{name: "session merge", as: "submit", args: []string{"session", "merge", "{app}", "{branch}", "-o", "json"},
			json: map[string]string{"op": "merge", "len": "4", "parents.0": "{app}", "parents.1": "{branch}"}},
		walkStep{name: "session detach", as: "submit", args: []string{"session", "detach", "{app}"},
			want: []string{"detach  len=3"}, notWant: []string{"parents="}},
		walkStep{name: "session place", as: "submit", args: []string{"session", "place", "{app}", "--backend", "docker", "-o", "json"},
			json: map[string]string{"op": "place", "parents.0": "{app}"}},
		walkStep{name: "session list", as: "read", args: []string{"session", "list", "--roots"},
			want: []string{"{root}  create", "{root2}  create"}, notWant: []string{"{app}"}},
		walkStep{name: "session export", as: "read", args: []string{"session", "export", "{app}"},
			want:    []string{`"record":"rath.session"`, `"head":"{app}"`, `"one more thing"`},
			capture: map[string]string{"exported": "stdout"}},
		walkStep{name: "session import (its own export, on stdin)", as: "submit", args: []string{"session", "import", "-"},
			stdin: "{exported}", want: []string{"{app}  append  len=3"}},
		walkStep{name: "session export --format openrath", as: "read", args: []string{"session", "export", "{app}", "--format", "openrath"},
			want: []string{`"record_type": "header"`, `"id": "{app}"`, `"one more thing"`}},
		walkStep{name: "session import (OpenRath transcripts)", as: "submit",
			args: []string{"session", "import", "{fixtures}/sessions", "-o", "json"}, check: checkOpenRathImport},
		walkStep{name: "session export --format openrath (an OpenRath fixture)", as: "read",
			args: []string{"session", "export", "{fxSession}", "--format", "openrath"}, check: checkOpenRathExport},
		walkStep{name: "session import (OpenRath lineage)", as: "submit",
			args: []string{"session", "import", "{fixtures}/lineage_rich.jsonl"}, want: []string{"  create ", "  fork ", "  merge ", "  detach "}},
	)

	// Runs, watching, approvals, workflows.
	add(
		walkStep{name: "run --watch", as: "submit",
			args:    []string{"run", "--agent", "{echo.yaml}", "--message", "walk the cluster", "--watch"},
			want:    []string{"run.completed", "succeeded", "answer: walked every step"},
			capture: map[string]string{"run1": `re:^run (run_\S+)`}},
		walkStep{name: "runs show", as: "read", args: []string{"runs", "show", "{run1}", "-o", "json"},
			json:    map[string]string{"id": "{run1}", "status": "succeeded", "kind": "agent", "steps.0.status": "committed"},
			capture: map[string]string{"in1": "input", "out1": "output"}},
		walkStep{name: "runs show (text)", as: "read", args: []string{"runs", "show", "{run1}"},
			want: []string{"status  succeeded", "output  {out1}"}},
		walkStep{name: "runs list", as: "read", args: []string{"runs", "list"}, want: []string{"{run1}  succeeded"}},
		walkStep{name: "runs show (not found)", as: "read", args: []string{"runs", "show", "run_01a21956-0000-7000-8000-000000000000"}, code: 4,
			wantErr: []string{"not found"}},
		walkStep{name: "no coordinator there", as: "read", server: "http://127.0.0.1:1", args: []string{"runs", "list"}, code: 1,
			wantErr: []string{"no coordinator at http://127.0.0.1:1"}},
		walkStep{name: "runs watch (a finished run)", as: "read", args: []string{"runs", "watch", "{run1}"},
			want: []string{"run.submitted", "step.committed", "run.completed", "answer: walked every step"}},
		walkStep{name: "run (a slow one, to cancel)", as: "submit",
			args:    []string{"run", "--agent", "{slow.yaml}", "--message", "never mind", "-o", "json"},
			capture: map[string]string{"run2": "id"}},
		walkStep{name: "runs cancel", as: "submit", args: []string{"runs", "cancel", "{run2}"}, want: []string{"{run2}"}},
		walkStep{name: "runs watch (the canceled run)", as: "read", args: []string{"runs", "watch", "{run2}"}, code: 1,
			want: []string{"run.canceled"}, notWant: []string{"too late"}},
		walkStep{name: "run --watch (waits for approval)", as: "submit",
			args: []string{"run", "--agent", "{scribe.yaml}", "--message", "take notes", "--watch"}, code: 3,
			want: []string{"step.waiting", "write_workspace_file"}, wantErr: []string{"waiting for approval"},
			capture: map[string]string{"run3": `re:^run (run_\S+)`}},
		walkStep{name: "approve", as: "submit", args: []string{"approve", "{run3}"},
			want: []string{"approved  w1  write_workspace_file"}},
		walkStep{name: "runs watch (the approved run)", as: "read", args: []string{"runs", "watch", "{run3}"},
			want: []string{"approval.decided", "step.tool_result write_workspace_file ok", "answer: saved the notes"}},
		walkStep{name: "runs show (the approved run)", as: "read", args: []string{"runs", "show", "{run3}", "-o", "json"},
			json: map[string]string{"status": "succeeded"}, capture: map[string]string{"in3": "input", "out3": "output"}},
		// review decides an ambiguous call (a worker died inside it): the
		// walk cannot kill a worker, so it checks the command reaches the
		// endpoint with auth on and is refused on a run with none
		// (internal/worker and internal/app test the decisions).
		walkStep{name: "review (nothing to review)", as: "submit", args: []string{"review", "{run3}", "--retry"}, code: 1,
			wantErr: []string{"409", "no tool call waits for a review"}},
		walkStep{name: "run --watch (to reject)", as: "submit",
			args: []string{"run", "--agent", "{scribe.yaml}", "--message", "take other notes", "--watch"}, code: 3,
			capture: map[string]string{"run4": `re:^run (run_\S+)`}},
		walkStep{name: "reject --watch", as: "submit", args: []string{"reject", "{run4}", "--reason", "not today", "--watch"},
			want: []string{"rejected", "not today", "answer: saved the notes"}, notWant: []string{"write_workspace_file ok"}},
		walkStep{name: "run (a workflow file) --watch", as: "submit",
			args:    []string{"run", "{triage.yaml}", "--message", "I was charged twice.", "--watch"},
			want:    []string{"succeeded", "answer: We refunded the duplicate charge"},
			capture: map[string]string{"wfRun": `re:^run (run_\S+)`}},
		walkStep{name: "runs show (the workflow run)", as: "read", args: []string{"runs", "show", "{wfRun}", "-o", "json"},
			json:    map[string]string{"kind": "workflow", "status": "succeeded", "steps": "*"},
			capture: map[string]string{"wfStep1": "steps.1.key"}},
		// Accepting changes is for a workflow run that failed as
		// nondeterministic (or still runs); it names the flag it needs
		// and refuses a run that ended well.
		walkStep{name: "runs resume (without --accept-changes)", as: "submit", args: []string{"runs", "resume", "{wfRun}"}, code: 2,
			wantErr: []string{"--accept-changes"}},
		walkStep{name: "runs resume --accept-changes (a succeeded run)", as: "submit", args: []string{"runs", "resume", "{wfRun}", "--accept-changes"}, code: 1,
			wantErr: []string{"succeeded"}},
	)

	// Reading the graph.
	add(
		walkStep{name: "graph (svg)", as: "read", args: []string{"graph", "{out3}"}, want: []string{"<svg", "scribe"}},
		walkStep{name: "graph --format dot", as: "read", args: []string{"graph", "{out3}", "--format", "dot"}, want: []string{"digraph"}},
		walkStep{name: "graph --run --format mermaid", as: "read", args: []string{"graph", "--run", "{run3}", "--format", "mermaid"},
			want: []string{"flowchart", "scribe"}},
		walkStep{name: "graph -o json", as: "read", args: []string{"graph", "{out3}", "--depth", "0", "-o", "json"},
			json: map[string]string{"nodes": "*", "edges": "*"}},
		walkStep{name: "blame", as: "read", args: []string{"blame", "{out3}"},
			want: []string{"scribe", "write_workspace_file", "saved the notes", "{run3}"}},
		walkStep{name: "diff", as: "read", args: []string{"diff", "{in3}", "{out3}"},
			want: []string{"common prefix: 1 chunks", "+ 4 assistant: saved the notes"}},
		walkStep{name: "session files", as: "read", args: []string{"session", "files", "{out3}"},
			want: []string{"1 files, 18 bytes", "notes/todo.txt"}},
		walkStep{name: "session diff", as: "read", args: []string{"session", "diff", "{in3}", "{out3}"},
			want: []string{"A  notes/todo.txt"}},
		walkStep{name: "session cat", as: "read", args: []string{"session", "cat", "{out3}", "notes/todo.txt"},
			want: []string{"walk every command"}},
	)

	// Lineage operations.
	add(
		walkStep{name: "verify", as: "read", args: []string{"verify", "{out3}"}, want: []string{"verified 4 versions, 5 chunks: ok"}},
		walkStep{name: "verify --all", as: "read", args: []string{"verify", "--all", "-o", "json"},
			json: map[string]string{"ok": "true", "versions": "*", "chunks": "*"}},
		walkStep{name: "dossier (md)", as: "read", args: []string{"dossier", "{run3}"},
			want: []string{"# Evidence dossier: run {run3}", "status: succeeded", "output: `{out3}`", "write_workspace_file"}},
		walkStep{name: "dossier --format html", as: "read", args: []string{"dossier", "{run3}", "--format", "html"},
			want: []string{"<!DOCTYPE html>", "{run3}"}},
		walkStep{name: "dossier -o json", as: "read", args: []string{"dossier", "{run3}", "-o", "json"},
			json: map[string]string{"run.id": "{run3}", "run.output": "{out3}", "status": "succeeded"}},
		walkStep{name: "replay", as: "submit", args: []string{"replay", "{out1}"},
			want: []string{"of {out1}: 1 chunks, identical=true"}},
		// A whole workflow run (the triage selector loop): every step
		// from its recording, no model called.
		walkStep{name: "replay --run --strict", as: "submit", args: []string{"replay", "--run", "{wfRun}", "--strict"},
			want: []string{"replay of run {wfRun}", "identical=true", "select", "agent"}},
		walkStep{name: "replay --run -o json", as: "submit", args: []string{"replay", "--run", "{wfRun}", "-o", "json"},
			json: map[string]string{"run": "{wfRun}", "identical": "true", "replay": "*", "steps": "*"}},
		// Rerun the workflow run from its second step (the agent the
		// router chose): the first step is kept, the rest run again.
		walkStep{name: "rerun --run --from STEP", as: "submit", args: []string{"rerun", "--run", "{wfRun}", "--from", "{wfStep1}"},
			want:    []string{"rerun of run {wfRun} from step {wfStep1}: new run", "(1 steps kept)"},
			capture: map[string]string{"rerunRun": `re:new run (run_\S+)`}},
		walkStep{name: "runs show (the rerun)", as: "read", args: []string{"runs", "show", "{rerunRun}", "-o", "json"},
			json: map[string]string{"id": "{rerunRun}", "kind": "workflow", "steps.0.status": "committed"}},
		walkStep{name: "rerun", as: "submit", args: []string{"rerun", "{out1}", "--from", "{in1}", "--model", "scripted:{rerun-replies.yaml}"},
			want: []string{"rerun of {out1} from {in1}"}},
		walkStep{name: "pin", as: "admin", args: []string{"pin", "{out1}", "--note", "the walk keeps it"}, want: []string{"pinned {out1}"}},
		walkStep{name: "pins", as: "read", args: []string{"pins"}, want: []string{"{out1}  the walk keeps it"}},
		walkStep{name: "unpin", as: "admin", args: []string{"unpin", "{out1}"}, want: []string{"unpinned {out1}"}},
		walkStep{name: "pins (after unpin)", as: "read", args: []string{"pins"}, notWant: []string{"{out1}"}},
		// The imported OpenRath versions keep their own (old) times and
		// nothing keeps them: gc frees them. What the walk made this hour
		// stays.
		walkStep{name: "gc --dry-run", as: "admin", args: []string{"gc", "--keep", "1h", "--dry-run"},
			want: []string{"would free "}, capture: map[string]string{"gcVersions": `re:would free (\d+) versions`}},
		walkStep{name: "gc", as: "admin", args: []string{"gc", "--keep", "1h", "-o", "json"},
			json: map[string]string{"versions": "{gcVersions}"}},
		walkStep{name: "session show (after gc)", as: "read", args: []string{"session", "show", "{app}"},
			want: []string{"user: one more thing"}},
		walkStep{name: "session new (a secret to redact)", as: "submit",
			args: []string{"session", "new", "--user", "my password is hunter2", "-o", "json"}, capture: map[string]string{"secret": "id"}},
		walkStep{name: "redact", as: "admin", args: []string{"redact", "{secret}", "--chunk", "0", "--reason", "a password"},
			want: []string{"redacted", "{secret}"}},
		walkStep{name: "session show (after redact)", as: "read", args: []string{"session", "show", "{secret}"},
			want: []string{"user: [redacted]"}, notWant: []string{"hunter2"}},
		walkStep{name: "redactions", as: "admin", args: []string{"redactions"}, want: []string{"{secret}", "ord 0", "a password"}},
		walkStep{name: "check", as: "admin", args: []string{"check"}, want: []string{"checked", "ok"}, notWant: []string{"checked 0 versions"}},
	)

	// Training data (docs/training-data.md).
	add(
		walkStep{name: "export trajectories", as: "read", args: []string{"export", "trajectories", "--run", "{run3}", "--quiet"},
			want: []string{`"messages":[`, `"provenance":{`, `"version_id":"{out3}"`, `"run":"{run3}"`}, wantErr: []string{"exported 1 records"}},
		walkStep{name: "label", as: "submit", args: []string{"label", "{out3}", "--score", "1", "--by", "walk"}, want: []string{"labeled {out3}"}},
		walkStep{name: "export pairs -o json", as: "read", args: []string{"export", "pairs", "--run", "{run3}", "--from", "labels,scores", "-o", "json"},
			wantErr: []string{`"labeled":1`, `"written":0`}},
	)
	if !dev {
		add(walkStep{name: "a read token cannot label", as: "read", args: []string{"label", "{out3}", "--score", "0"}, code: 1,
			wantErr: []string{"403"}})
	}

	// Memory.
	add(
		walkStep{name: "memory remember", as: "submit",
			args: []string{"memory", "remember", "memory://user/memories/preferences/theme", "Prefers a dark theme at night.", "--meta", "source=cli"},
			want: []string{"remembered memory://user/memories/preferences/theme (30 bytes)"}},
		walkStep{name: "memory remember (stdin)", as: "submit", stdin: "Reads English, writes Python.\n",
			args: []string{"memory", "remember", "memory://user/memories/preferences/language"},
			want: []string{"remembered memory://user/memories/preferences/language"}},
		walkStep{name: "memory recall", as: "read", args: []string{"memory", "recall", "reading code at night", "-k", "3", "-o", "json"},
			json: map[string]string{"hits.0.uri": "memory://user/memories/preferences/theme"}},
		walkStep{name: "memory list", as: "read", args: []string{"memory", "list", "memory://user"},
			want: []string{"memory://user/memories/preferences/language", "memory://user/memories/preferences/theme"}},
		walkStep{name: "memory show", as: "read", args: []string{"memory", "show", "memory://user/memories/preferences/theme"},
			want: []string{"meta:       source=cli", "Prefers a dark theme at night."}},
		walkStep{name: "memory delete", as: "submit", args: []string{"memory", "delete", "memory://user/memories/preferences/language"},
			want: []string{"deleted memory://user/memories/preferences/language"}},
		walkStep{name: "memory list --deleted", as: "read", args: []string{"memory", "list", "--deleted"},
			want: []string{"memory://user/memories/preferences/language (deleted)"}},
		walkStep{name: "memory commit", as: "submit", args: []string{"memory", "commit", "{out1}"},
			want: []string{"committed memory://session/{out1}/transcript", "written by {out1}"}},
		walkStep{name: "memory recall (the committed transcript)", as: "read", args: []string{"memory", "recall", "walked every step"},
			want: []string{"memory://session/{out1}/transcript"}},
	)

	// Scopes and tenants, where there is auth.
	if !dev {
		add(
			walkStep{name: "a read token cannot gc", as: "read", args: []string{"gc", "--keep", "1h"}, code: 1, wantErr: []string{"403"}},
			walkStep{name: "a read token cannot redact", as: "read", args: []string{"redact", "{app}", "--chunk", "0", "--reason", "x"}, code: 1,
				wantErr: []string{"403"}},
			walkStep{name: "token create submit@umbrella", as: "bootstrap",
				args:    []string{"token", "create", "--scope", "submit", "--tenant", "umbrella", "--name", "walk-umbrella", "-o", "json"},
				capture: map[string]string{"umbrella": "token"}},
			walkStep{name: "another tenant cannot see acme's run", as: "umbrella", args: []string{"runs", "show", "{run1}"}, code: 4,
				wantErr: []string{"not found"}, notWant: []string{"walk the cluster"}},
			walkStep{name: "another tenant cannot see acme's session", as: "umbrella", args: []string{"session", "show", "{app}"}, code: 4,
				wantErr: []string{"not found"}, notWant: []string{"one more thing"}},
			walkStep{name: "another tenant cannot see acme's memory", as: "umbrella", args: []string{"memory", "list"},
				notWant: []string{"preferences"}},
		)
	}
	return steps
}

// walkLong is longer than any line a printer might cut: session show
// prints the full transcript.
var walkLong = strings.Repeat("every word of this message is kept, ", 8) + "to the end."

// checkOpenRathImport: every transcript of the fixtures' sessions
// directory was imported; it keeps one of them for the next step.
func checkOpenRathImport(w *walker, out string) error {
	exp, err := openRathExpected(w.vars["fixtures"])
	if err != nil {
		return err
	}
	var infos []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &infos); err != nil {
		return fmt.Errorf("import output %q: %w", out, err)
	}
	if len(infos) != len(exp) {
		return fmt.Errorf("imported %d transcripts, want %d", len(infos), len(exp))
	}
	names := slices.Sorted(mapKeys(exp))
	c := exp[names[0]]
	w.vars["fxSession"], w.vars["fxFile"] = c.SessionID, c.File
	return nil
}

// checkOpenRathExport: the fixture exports back byte for byte (a torn last
// line dropped).
func checkOpenRathExport(w *walker, out string) error {
	want, err := os.ReadFile(filepath.Join(w.vars["fixtures"], w.vars["fxFile"]))
	if err != nil {
		return err
	}
	if i := bytes.LastIndexByte(want, '\n'); i >= 0 {
		want = want[:i+1]
	}
	if out != string(want) {
		return fmt.Errorf("export of %s differs from %s:\n%s\nwant\n%s", w.vars["fxSession"], w.vars["fxFile"], tail(out, 1500), tail(string(want), 1500))
	}
	return nil
}

type openRathCase struct {
	File      string `json:"file"`
	SessionID string `json:"session_id"`
}

func openRathExpected(fx string) (map[string]openRathCase, error) {
	var exp struct {
		Cases map[string]openRathCase `json:"cases"`
	}
	b, err := os.ReadFile(filepath.Join(fx, "persisted.expected.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		return nil, fmt.Errorf("persisted.expected.json: %w", err)
	}
	if len(exp.Cases) == 0 {
		return nil, errors.New("persisted.expected.json has no cases")
	}
	return exp.Cases, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// walker runs the steps as one user: env holds only RATH_SERVER, RATH_TOKEN
// (per step), HOME and PATH, and rathctl runs in an empty directory.
type walker struct {
	t    *testing.T
	dir  string // the working directory: must stay empty of stores
	home string
	vars map[string]string
}

func newWalker(t *testing.T, server string, vars map[string]string) *walker {
	t.Helper()
	w := &walker{t: t, dir: t.TempDir(), home: t.TempDir(), vars: map[string]string{"server": server}}
	for k, v := range vars {
		w.vars[k] = v
	}
	files := t.TempDir()
	for name, content := range walkFiles {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		w.vars[name] = p
	}
	w.vars["triage.yaml"] = repoPath(t, "examples/workflows/triage.yaml")
	w.vars["fixtures"] = testenv.OpenRathFixtures(t)
	return w
}

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var walkVar = regexp.MustCompile(`\{([A-Za-z0-9_.-]+)\}`)

// expand replaces {name} with its variable; it returns the names missing.
func (w *walker) expand(s string) (string, []string) {
	var missing []string
	out := walkVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := w.vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	return out, missing
}

// walk runs the steps in order and reports each: ok, or a failure.
func (w *walker) walk(steps []walkStep) {
	w.t.Helper()
	for _, s := range steps {
		if err := w.step(s); err != nil {
			w.t.Errorf("step %q: %v", s.name, err)
			continue
		}
		w.t.Logf("ok       %s", s.name)
	}
	w.t.Logf("%d steps", len(steps))
}

// leftovers returns what is in the walk's working directory, and empties it.
func (w *walker) leftovers() []string {
	w.t.Helper()
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		w.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if err := os.RemoveAll(filepath.Join(w.dir, e.Name())); err != nil {
			w.t.Fatal(err)
		}
	}
	return names
}

func (w *walker) step(s walkStep) error {
	var missing []string
	exp := func(in string) string {
		out, m := w.expand(in)
		missing = append(missing, m...)
		return out
	}
	args := make([]string, len(s.args))
	for i, a := range s.args {
		args[i] = exp(a)
	}
	stdin := exp(s.stdin)
	token := ""
	if s.as != "" {
		token = exp("{" + s.as + "}")
	}
	want, notWant, wantErr := expandAll(exp, s.want), expandAll(exp, s.notWant), expandAll(exp, s.wantErr)
	jsonWant := map[string]string{}
	for k, v := range s.json {
		jsonWant[k] = exp(v)
	}
	if len(missing) > 0 {
		return fmt.Errorf("needs %v, which an earlier step did not capture", missing)
	}

	out, errOut, code := w.rathctl(cmp.Or(s.server, w.vars["server"]), token, stdin, args...)
	fail := func(format string, a ...any) error {
		return fmt.Errorf("rathctl %s: %s\nexit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), fmt.Sprintf(format, a...), code, tail(out, 2000), tail(errOut, 2000))
	}
	// With no --store and no RATH_STORE a command works through the
	// coordinator: one that made a store in the working directory did
	// not (whatever it printed). Clear it for the next step.
	if left := w.leftovers(); len(left) > 0 {
		return fail("it made %v in the working directory: it opened a local store instead of using the coordinator", left)
	}
	if code != s.code {
		return fail("exit %d, want %d", code, s.code)
	}
	for _, x := range want {
		if !strings.Contains(out, x) {
			return fail("stdout lacks %q", x)
		}
	}
	for _, x := range notWant {
		if strings.Contains(out, x) {
			return fail("stdout has %q", x)
		}
	}
	for _, x := range wantErr {
		if !strings.Contains(errOut, x) {
			return fail("stderr lacks %q", x)
		}
	}
	var doc any
	if len(jsonWant) > 0 || hasJSONCapture(s.capture) {
		dec := json.NewDecoder(strings.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return fail("stdout is not JSON: %v", err)
		}
	}
	for _, path := range slices.Sorted(mapKeys(jsonWant)) {
		v := jsonWant[path]
		got, ok := jsonAt(doc, path)
		if err := jsonMatch(got, ok, v); err != nil {
			return fail("%s: %v", path, err)
		}
	}
	for _, name := range slices.Sorted(mapKeys(s.capture)) {
		spec := s.capture[name]
		var v string
		switch {
		case spec == "stdout":
			v = out
		case strings.HasPrefix(spec, "re:"):
			m := regexp.MustCompile(`(?m)` + strings.TrimPrefix(spec, "re:")).FindStringSubmatch(out)
			if m == nil {
				return fail("capture %s: stdout does not match %s", name, spec)
			}
			v = m[1]
		default:
			got, ok := jsonAt(doc, spec)
			s, isStr := got.(string)
			if !ok || !isStr || s == "" {
				return fail("capture %s: no string at %s", name, spec)
			}
			v = s
		}
		w.vars[name] = v
	}
	if s.check != nil {
		if err := s.check(w, out); err != nil {
			return fail("%v", err)
		}
	}
	return nil
}

func expandAll(exp func(string) string, in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = exp(s)
	}
	return out
}

func hasJSONCapture(c map[string]string) bool {
	for _, spec := range c {
		if spec != "stdout" && !strings.HasPrefix(spec, "re:") {
			return true
		}
	}
	return false
}

// jsonAt follows a dotted path (array elements by index) into doc.
func jsonAt(doc any, path string) (any, bool) {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func jsonMatch(got any, ok bool, want string) error {
	if !ok {
		return errors.New("missing")
	}
	switch {
	case want == "*":
		switch g := got.(type) {
		case nil:
			return errors.New("null, want a value")
		case string:
			if g == "" {
				return errors.New(`"", want a value`)
			}
		case json.Number:
			if g.String() == "0" {
				return errors.New("0, want a value")
			}
		case []any:
			if len(g) == 0 {
				return errors.New("[], want elements")
			}
		case map[string]any:
			if len(g) == 0 {
				return errors.New("{}, want fields")
			}
		}
		return nil
	case strings.HasPrefix(want, "#"):
		a, isArr := got.([]any)
		if !isArr || strconv.Itoa(len(a)) != want[1:] {
			return fmt.Errorf("%v, want %s elements", got, want[1:])
		}
		return nil
	}
	var s string
	switch g := got.(type) {
	case string:
		s = g
	case json.Number:
		s = g.String()
	case bool:
		s = strconv.FormatBool(g)
	default:
		b, _ := json.Marshal(g)
		s = string(b)
	}
	if s != want {
		return fmt.Errorf("%q, want %q", s, want)
	}
	return nil
}

// rathctl runs the built rathctl as the walk's user: the environment holds
// RATH_SERVER, RATH_TOKEN (when token is set), HOME and PATH, nothing else.
func (w *walker) rathctl(server, token, stdin string, args ...string) (string, string, int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(w.t, "rathctl"), args...)
	cmd.Env = []string{"RATH_SERVER=" + server, "HOME=" + w.home, "PATH=" + os.Getenv("PATH")}
	if token != "" {
		cmd.Env = append(cmd.Env, "RATH_TOKEN="+token)
	}
	cmd.Dir = w.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestWalkCluster walks every documented command against a coordinator and
// two workers, separate processes on Postgres with auth on, with only
// RATH_SERVER and a token.
func TestWalkCluster(t *testing.T) {
	t.Parallel()
	s := newSecured(t, allowLocal(t))
	// A second worker, as the first.
	args := slices.Clone(s.worker.args)
	if i := slices.Index(args, "--name"); i >= 0 {
		args[i+1] = "restricted-2"
	}
	w2 := &proc{name: "worker", args: args, env: s.worker.env, log: filepath.Join(s.dir, "worker-2.log")}
	s.procs = append(s.procs, w2)
	w2.start(t)

	w := newWalker(t, s.server, map[string]string{"bootstrap": secBootstrap})
	w.walk(walkSteps(false))
}

// TestWalkDev walks the same commands against `rathctl dev`, started as a
// process in a directory of its own.
func TestWalkDev(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := &proc{name: "rathctl", args: []string{"dev", "--addr", "127.0.0.1:0", "--dir", filepath.Join(dir, "state")},
		env: []string{"RATH_SERVER=", "RATH_STORE=", "RATH_TOKEN="}, log: filepath.Join(dir, "dev.log")}
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
	// Dev runs without auth: any token is accepted and acts as the
	// default tenant's admin.
	w := newWalker(t, server, map[string]string{"admin": "dev", "submit": "dev", "read": "dev"})
	w.walk(walkSteps(true))
}

// TestWalkCoversTheDocs fails when a rathctl command that README.md or
// docs/*.md mention (in code blocks or inline code), or any command of
// rathctl's tree, has no step in the walk and no exemption; and when the
// docs mention a command rathctl does not have.
func TestWalkCoversTheDocs(t *testing.T) {
	t.Parallel()
	tree := commandTree(t)
	walked := map[string]bool{}
	for _, dev := range []bool{false, true} {
		for _, s := range walkSteps(dev) {
			// A step walks its command and the groups above it.
			words := strings.Fields(commandPath(tree, s.args))
			for i := range words {
				walked[strings.Join(words[:i+1], " ")] = true
			}
		}
	}
	for ex := range walkExempt {
		if !tree[ex] {
			t.Errorf("walkExempt names %q, which is no rathctl command", ex)
		}
		if walked[ex] {
			t.Errorf("walkExempt names %q, which the walk runs", ex)
		}
	}
	docs, err := filepath.Glob(repoPath(t, "docs/*.md"))
	if err != nil {
		t.Fatal(err)
	}
	mentioned := map[string][]string{} // command path -> where
	for _, f := range append([]string{repoPath(t, "README.md")}, docs...) {
		for _, m := range docMentions(t, f) {
			where := fmt.Sprintf("%s:%d", filepath.Base(f), m.line)
			// `rathctl approve|reject RUN` names two commands.
			for _, words := range alternatives(m.words) {
				path, rest := commandPathOf(tree, words)
				if path == "" {
					if len(rest) > 0 && commandWord.MatchString(rest[0]) {
						t.Errorf("%s mentions `rathctl %s`: rathctl has no command %q", where, strings.Join(words, " "), rest[0])
					}
					continue
				}
				mentioned[path] = append(mentioned[path], where)
				// The flags it names are the command's.
				for _, word := range rest {
					flag, _, _ := strings.Cut(word, "=")
					if !docFlag.MatchString(flag) {
						continue
					}
					if !slices.Contains(flags(t, path), flag) {
						t.Errorf("%s mentions `rathctl %s … %s`: the command has no flag %s", where, path, flag, flag)
					}
				}
			}
		}
	}
	for _, path := range slices.Sorted(mapKeys(mentioned)) {
		if !walked[path] && walkExempt[path] == "" {
			t.Errorf("`rathctl %s` (%s) has no step in the walk", path, strings.Join(mentioned[path], ", "))
		}
	}
	for _, path := range slices.Sorted(mapKeys(tree)) {
		if !walked[path] && walkExempt[path] == "" && len(mentioned[path]) == 0 {
			t.Errorf("`rathctl %s` is neither walked nor exempt (and no doc mentions it)", path)
		}
	}
	t.Logf("%d documented command paths, %d walked, %d exempt", len(mentioned), len(walked), len(walkExempt))
}

// commandTree reads rathctl's command paths from its help, recursively
// (help left out; completion without its per-shell subcommands).
func commandTree(t *testing.T) map[string]bool {
	t.Helper()
	tree := map[string]bool{}
	var visit func(path []string)
	visit = func(path []string) {
		cmd := exec.Command(bin(t, "rathctl"), append(slices.Clone(path), "--help")...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("rathctl %v --help: %v", path, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		in := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "Available Commands:":
				in = true
			case in && strings.TrimSpace(line) == "":
				in = false
			case in:
				name := strings.Fields(line)[0]
				if name == "help" {
					continue
				}
				if name == "completion" {
					tree[name] = true // cobra's; its shell subcommands are not walked
					continue
				}
				sub := append(slices.Clone(path), name)
				tree[strings.Join(sub, " ")] = true
				visit(sub)
			}
		}
	}
	visit(nil)
	if len(tree) < 20 {
		t.Fatalf("rathctl's tree has %d commands: the help output was not understood", len(tree))
	}
	return tree
}

// commandPathOf descends the tree along words and returns the command path
// and the words after it.
func commandPathOf(tree map[string]bool, words []string) (string, []string) {
	path := ""
	i := 0
	for ; i < len(words); i++ {
		next := strings.TrimSpace(path + " " + words[i])
		if !tree[next] {
			break
		}
		path = next
	}
	return path, words[i:]
}

// docFlag is what a flag in the docs looks like.
var docFlag = regexp.MustCompile(`^--?[a-z][a-z0-9-]*$`)

// flagCache holds each command's flags, read from its help.
var flagCache = map[string][]string{}

// flags returns the flags (long and short) of the command at path.
func flags(t *testing.T, path string) []string {
	t.Helper()
	if fs, ok := flagCache[path]; ok {
		return fs
	}
	cmd := exec.Command(bin(t, "rathctl"), append(strings.Fields(path), "--help")...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rathctl %s --help: %v", path, err)
	}
	var fs []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:(-[a-z]), )?(--[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		if m[1] != "" {
			fs = append(fs, m[1])
		}
		fs = append(fs, m[2])
	}
	flagCache[path] = fs
	return fs
}

// commandWord is what a command's name looks like (not a flag, a path or
// a diagram's arrow).
var commandWord = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// alternatives expands a first word of the form a|b into one word list each.
func alternatives(words []string) [][]string {
	if len(words) == 0 || !strings.Contains(words[0], "|") {
		return [][]string{words}
	}
	var out [][]string
	for _, alt := range strings.Split(words[0], "|") {
		out = append(out, append([]string{alt}, words[1:]...))
	}
	return out
}

func commandPath(tree map[string]bool, args []string) string {
	p, _ := commandPathOf(tree, args)
	return p
}

type docMention struct {
	line  int
	words []string
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// docMentions returns every `rathctl …` in a Markdown file's fenced code
// blocks and inline code spans, with the words that follow it.
func docMentions(t *testing.T, file string) []docMention {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ms []docMention
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		var codes []string
		if fenced {
			codes = []string{line}
		} else {
			for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
				codes = append(codes, m[1])
			}
		}
		for _, code := range codes {
			f := strings.Fields(code)
			for j, w := range f {
				if w == "rathctl" || strings.HasSuffix(w, "/rathctl") {
					ms = append(ms, docMention{line: i + 1, words: f[j+1:]})
				}
			}
		}
	}
	sort.SliceStable(ms, func(a, b int) bool { return ms[a].line < ms[b].line })
	return ms
}
