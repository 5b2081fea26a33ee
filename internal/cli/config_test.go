package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/llm"
)

func TestConfigProviders(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "rath-home")
	file := filepath.Join(home, "config.yaml")
	run := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errOut := rathctl(t, stdin, append([]string{"config", "--file", file}, args...)...)
		if code != 0 {
			t.Fatalf("rathctl config %v: exit %d: %s", args, code, errOut)
		}
		return out
	}

	if out := run("", "show"); !strings.Contains(out, "does not exist yet") {
		t.Fatalf("show before setup: %q", out)
	}
	const secret = "sk-test-0123456789abcdef"
	if out := run(secret+"\n", "set-provider", "openai", "--api-key-stdin", "--model", "gpt-4o-mini", "--default"); !strings.Contains(out, "added provider openai") {
		t.Fatalf("set-provider: %q", out)
	}
	for path, want := range map[string]os.FileMode{home: 0o700, file: 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
	run("", "set-provider", "local", "--base-url", "http://localhost:11434/v1", "--model", "llama3.2")

	// show redacts the key, in text and JSON.
	out := run("", "show")
	if strings.Contains(out, secret) || !strings.Contains(out, redacted) || !strings.Contains(out, "default_provider: openai") ||
		!strings.Contains(out, "base_url: http://localhost:11434/v1") {
		t.Fatalf("show:\n%s", out)
	}
	var shown shownConfig
	if err := json.Unmarshal([]byte(run("", "show", "-o", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Providers["openai"].APIKey != redacted || shown.Providers["openai"].Model != "gpt-4o-mini" ||
		shown.DefaultProvider != "openai" || !shown.Exists || shown.Path != file {
		t.Fatalf("show json = %+v", shown)
	}

	// The file is what llm.Resolve reads: the default provider, its key.
	c, err := llm.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Providers["openai"].APIKey != secret || c.Providers["local"].Model != "llama3.2" {
		t.Fatalf("saved config = %+v", c.Providers)
	}
	getenv := func(k string) string {
		if k == "RATH_HOME" {
			return home
		}
		return ""
	}
	if _, model, err := llm.Resolve(llm.ProviderSpec{}, "", getenv); err != nil || model != "gpt-4o-mini" {
		t.Fatalf("resolve with the default provider: %q, %v", model, err)
	}

	// Updating keeps what is not given; a key variable replaces the key.
	run("", "set-provider", "openai", "--api-key-env", "MY_OPENAI_KEY")
	c, _ = llm.LoadConfig(file)
	if p := c.Providers["openai"]; p.APIKey != "" || p.APIKeyEnv != "MY_OPENAI_KEY" || p.Model != "gpt-4o-mini" {
		t.Fatalf("updated entry = %+v", p)
	}

	if out := run("", "use", "local"); !strings.Contains(out, "default provider is now local") {
		t.Fatalf("use: %q", out)
	}
	if _, model, err := llm.Resolve(llm.ProviderSpec{}, "", getenv); err != nil || model != "llama3.2" {
		t.Fatalf("resolve after use: %q, %v", model, err)
	}
	run("", "remove-provider", "local")
	c, _ = llm.LoadConfig(file)
	if _, ok := c.Providers["local"]; ok || c.DefaultProvider != "" || len(c.Providers) != 1 {
		t.Fatalf("after remove: %+v", c)
	}
}

func TestConfigBadInput(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "config.yaml")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"bad name", "", []string{"set-provider", "no spaces", "--base-url", "http://x"}, 2, "provider name"},
		{"two keys", "", []string{"set-provider", "a", "--api-key", "k", "--api-key-env", "K"}, 2, "at most one of"},
		{"bad url", "", []string{"set-provider", "a", "--base-url", "localhost:11434"}, 2, `--base-url "localhost:11434" is not an http(s) URL`},
		{"bad kind", "", []string{"set-provider", "a", "--kind", "bedrock", "--base-url", "http://x"}, 2, `--kind "bedrock"`},
		{"bad env name", "", []string{"set-provider", "a", "--api-key-env", "MY-KEY"}, 2, "not an environment variable name"},
		{"no endpoint", "", []string{"set-provider", "a", "--model", "m"}, 2, "needs --base-url or a key"},
		{"empty stdin", "", []string{"set-provider", "a", "--api-key-stdin"}, 2, "held no key"},
		{"bad output", "", []string{"show", "-o", "yaml"}, 2, "--output must be text or json"},
		{"remove unknown", "", []string{"remove-provider", "ghost"}, 1, `no provider "ghost"`},
		{"use unknown", "", []string{"use", "ghost"}, 1, `no provider "ghost"`},
		{"unknown flag", "", []string{"set-provider", "a", "--api_key", "k"}, 2, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := rathctl(t, tc.stdin, append([]string{"config", "--file", file}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q, want it to contain %q", code, tc.code, errOut, tc.want)
			}
		})
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("bad input wrote the file: %v", err)
	}
}

func TestConfigRefusesReadableFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte("providers: {a: {base_url: 'http://x'}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, args := range [][]string{{"show"}, {"set-provider", "b", "--base-url", "http://y"}} {
		code, _, errOut := rathctl(t, "", append([]string{"config", "--file", file}, args...)...)
		if code != 1 || !strings.Contains(errOut, "chmod 600") {
			t.Fatalf("%v on a 0644 file: exit %d, %q", args, code, errOut)
		}
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), "http://y") {
		t.Fatal("set-provider wrote a file it refused to read")
	}
}

func TestConfigKeepsOtherSections(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte("memory:\n  store: local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := rathctl(t, "", "config", "--file", file, "set-provider", "a", "--base-url", "http://x"); code != 0 {
		t.Fatal(errOut)
	}
	c, err := llm.LoadConfig(file)
	if err != nil || string(c.Other["memory"]) != `{"store":"local"}` {
		t.Fatalf("other sections after set-provider: %v, %v", c, err)
	}
	_, out, _ := rathctl(t, "", "config", "--file", file, "show")
	if !strings.Contains(out, "other sections, not shown: memory") || strings.Contains(out, "store: local") {
		t.Fatalf("show:\n%s", out)
	}
}

// TestConfigPath reads RATH_HOME, so it does not run in parallel.
func TestConfigPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("RATH_HOME", home)
	code, out, errOut := rathctl(t, "", "config", "path")
	if code != 0 || strings.TrimSpace(out) != filepath.Join(home, "config.yaml") {
		t.Fatalf("config path: %d %q %q", code, out, errOut)
	}
	code, out, _ = rathctl(t, "", "config", "path", "--file", "/etc/rath.yaml", "-o", "json")
	if code != 0 || strings.TrimSpace(out) != `{"path":"/etc/rath.yaml"}` {
		t.Fatalf("config path --file: %d %q", code, out)
	}
	t.Setenv("RATH_HOME", "")
	t.Setenv("HOME", home)
	_, out, _ = rathctl(t, "", "config", "path")
	if strings.TrimSpace(out) != filepath.Join(home, ".rath", "config.yaml") {
		t.Fatalf("config path from HOME: %q", out)
	}
}
