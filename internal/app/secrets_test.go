package app

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rath-run/rath/pkg/sandbox/sandboxtest"
)

const hideHelperEnv = "RATH_TEST_HIDESECRETS_HELPER"

// TestMain doubles the test binary as a process that hides its secrets
// (TestHideSecretsReexec) and as a gated fake model (TestWorkerHeap).
func TestMain(m *testing.M) {
	if os.Getenv(hideHelperEnv) == "1" {
		hideHelper()
		return
	}
	if os.Getenv(gatedModelEnv) == "1" {
		gatedModel()
		return
	}
	os.Exit(m.Run())
}

// hideReport is what the helper saw after HideSecrets.
type hideReport struct {
	Getenv   map[string]string
	Environ  string // /proc/self/environ
	Cmdline  string // /proc/self/cmdline
	ChildCat string // a child of the same user reading the helper's environ
	Pid      int
}

func hideHelper() {
	if err := HideSecrets(); err != nil {
		os.Stderr.WriteString(err.Error())
		os.Exit(2)
	}
	r := hideReport{Getenv: map[string]string{}, Pid: os.Getpid()}
	for _, k := range []string{"OPENAI_API_KEY", "RATH_STORE", "RATH_TOKEN", "NATS_URL", "LANG"} {
		r.Getenv[k] = os.Getenv(k)
	}
	b, _ := os.ReadFile("/proc/self/environ")
	r.Environ = string(b)
	b, _ = os.ReadFile("/proc/self/cmdline")
	r.Cmdline = string(b)
	// A tool on the local backend of a non-root worker: a child of the
	// same user, with an environment of its own.
	cmd := exec.Command("/bin/sh", "-c", "cat /proc/$PPID/environ /proc/$PPID/cmdline 2>&1; ls /proc/$PPID/fd 2>&1")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, _ := cmd.CombinedOutput()
	r.ChildCat = string(out)
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// TestHideSecretsReexec starts a process the way an operator would, with
// secrets in its environment, a NAME_FILE and a --store flag: after
// HideSecrets it has every secret in its Go environment, none in
// /proc/self/environ or cmdline, and a child of the same user reads
// neither its environ nor its fd (non-dumpable).
func TestHideSecretsReexec(t *testing.T) {
	t.Parallel()
	dir := sandboxtest.Dir(t)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("tok-from-file-5f1d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := os.Args[0]
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// Run as nobody, so the child's read is a same-user read, as for a
		// non-root worker: root would read anything.
		exe = filepath.Join(dir, "app.test")
		copyFile(t, os.Args[0], exe)
		cred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	}
	cmd := exec.Command(exe, "-test.run=^$", "--name", "w1", "--store", "postgres://u:pw-flag-91c2@db/rath", "--nats=nats://127.0.0.1:4222")
	cmd.Env = []string{
		hideHelperEnv + "=1", "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
		"OPENAI_API_KEY=sk-test-env-7d0a",
		"RATH_STORE=postgres://u:pw-env-33b8@db/rath",
		"RATH_TOKEN_FILE=" + tokenFile,
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("helper: %v: %s", err, errOut.String())
	}
	var r hideReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("helper output %q: %v", out.String(), err)
	}
	want := map[string]string{
		"OPENAI_API_KEY": "sk-test-env-7d0a",
		"RATH_STORE":     "postgres://u:pw-flag-91c2@db/rath", // the flag wins, as it would in the flag set
		"RATH_TOKEN":     "tok-from-file-5f1d",
		"LANG":           "C.UTF-8",
	}
	for k, v := range want {
		if r.Getenv[k] != v {
			t.Errorf("os.Getenv(%s) = %q after HideSecrets, want %q", k, r.Getenv[k], v)
		}
	}
	for _, secret := range []string{"sk-test-env", "pw-env", "pw-flag", "tok-from-file"} {
		for what, s := range map[string]string{"/proc/self/environ": r.Environ, "/proc/self/cmdline": r.Cmdline, "a child's read of /proc/$PPID": r.ChildCat} {
			if strings.Contains(s, secret) {
				t.Errorf("%s holds %s…: %q", what, secret, s)
			}
		}
	}
	if !strings.Contains(r.Cmdline, "--name\x00w1") || !strings.Contains(r.Cmdline, "--nats=nats://127.0.0.1:4222") {
		t.Errorf("cmdline %q lost the other flags", r.Cmdline)
	}
	if strings.Contains(r.ChildCat, "LANG=") || !strings.Contains(r.ChildCat, "Permission denied") {
		t.Errorf("a child of the same user read the non-dumpable process's /proc files: %q", r.ChildCat)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestIsSecretEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{"RATH_STORE", "sqlite:/var/lib/rath.db", true},
		{"RATH_TOKEN", "x", true},
		{"OPENAI_API_KEY", "sk-1", true},
		{"AWS_SECRET_ACCESS_KEY", "k", true},
		{"RATH_NATS_PASSWORD", "p", true},
		{"GITHUB_TOKEN", "t", true},
		{"NATS_URL", "nats://u:p@nats:4222", true},
		{"DATABASE", "postgres://h/db?password=p", true},
		{"NATS_URL", "nats://nats:4222", false},
		{"RATH_NATS_PASSWORD_FILE", "/run/secrets/nats", false},
		{"OPENAI_BASE_URL", "https://api.openai.com/v1", false},
		{"PATH", "/usr/bin", false},
		{"OPENAI_API_KEY", "", false},
	} {
		if got := IsSecretEnv(tc.name, tc.value); got != tc.want {
			t.Errorf("IsSecretEnv(%s=%q) = %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}

func TestSplitSecrets(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/bin", "OPENAI_API_KEY=sk", "NATS_URL=nats://n:4222"}
	for _, tc := range []struct {
		name          string
		args          []string
		wantArgs      []string
		wantStore     string
		wantNATS, has bool
	}{
		{"separate value", []string{"w", "--store", "postgres://a", "--slots", "1"}, []string{"w", "--slots", "1"}, "postgres://a", false, true},
		{"joined value", []string{"w", "-store=postgres://b", "migrate"}, []string{"w", "migrate"}, "postgres://b", false, true},
		{"after an empty flag value", []string{"w", "--health", "", "--store", "postgres://c"}, []string{"w", "--health", ""}, "postgres://c", false, true},
		{"nats with a password", []string{"w", "--nats", "nats://u:p@n:4222"}, []string{"w"}, "", true, false},
		{"nats without one stays", []string{"w", "--nats", "nats://n:4222"}, []string{"w", "--nats=nats://n:4222"}, "", false, false},
		{"after --", []string{"w", "--", "--store", "x"}, []string{"w", "--", "--store", "x"}, "", false, false},
		{"missing value", []string{"w", "--store"}, []string{"w", "--store"}, "", false, false},
	} {
		secrets, keep, rest := splitSecrets(env, tc.args)
		if !slices.Equal(rest, tc.wantArgs) {
			t.Errorf("%s: args %q, want %q", tc.name, rest, tc.wantArgs)
		}
		if store, ok := secrets["RATH_STORE"]; ok != tc.has || store != tc.wantStore {
			t.Errorf("%s: RATH_STORE %q (%v), want %q", tc.name, store, ok, tc.wantStore)
		}
		if _, ok := secrets["NATS_URL"]; ok != tc.wantNATS {
			t.Errorf("%s: NATS_URL handed over = %v, want %v", tc.name, ok, tc.wantNATS)
		}
		if secrets["OPENAI_API_KEY"] != "sk" || slices.Contains(keep, "OPENAI_API_KEY=sk") || !slices.Contains(keep, "PATH=/bin") {
			t.Errorf("%s: env kept %q, secrets %v", tc.name, keep, secrets)
		}
	}
}

func TestReadFileSecrets(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte("sk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY_FILE": f}
	got, err := readFileSecrets(func(k string) string { return env[k] })
	if err != nil || got["OPENAI_API_KEY"] != "sk-file" || len(got) != 1 {
		t.Fatalf("readFileSecrets = %v, %v", got, err)
	}
	env["OPENAI_API_KEY"] = "sk-env"
	if _, err := readFileSecrets(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY or OPENAI_API_KEY_FILE") {
		t.Fatalf("both set: %v, want an error naming both", err)
	}
	env = map[string]string{"RATH_STORE_FILE": filepath.Join(t.TempDir(), "missing")}
	if _, err := readFileSecrets(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "RATH_STORE_FILE") {
		t.Fatalf("missing file: %v, want an error naming RATH_STORE_FILE", err)
	}
}
