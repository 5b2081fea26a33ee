package llm_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rath-run/rath/pkg/llm"
)

func TestValidateModel(t *testing.T) {
	t.Parallel()
	for _, m := range []string{
		"gpt-4o-mini", "claude-sonnet-4-5", "llama3.2", "llama3.2:latest", "meta-llama/Llama-3.1-8B-Instruct",
		"@cf/meta/llama-3-8b-instruct", "anthropic.claude-3-haiku-20240307-v1:0", "accounts/fireworks/models/llama-v3p1-8b",
		"gpt+x", "scripted", "scripted:replies.yaml", "scripted:a_b-c.1", strings.Repeat("m", llm.MaxModelBytes),
	} {
		if err := llm.ValidateModel(m); err != nil {
			t.Errorf("ValidateModel(%q): %v", m, err)
		}
	}
	for _, c := range []struct{ model, want string }{
		{"", "required"},
		{strings.Repeat("x", 900001), "900001 bytes, over the 128-byte limit"},
		{strings.Repeat("m", llm.MaxModelBytes+1), "129 bytes, over the 128-byte limit"},
		{"scripted:/etc/hostname", "not a path"},
		{"scripted:../secret.yaml", "not a path"},
		{"scripted:dir/secret.yaml", "not a path"},
		{"scripted:..", "not a path"},
		{"scripted:a..b", "not a path"},
		{"scripted:", "not a path"},
		{"scripted:.hidden", "not a path"},
		{"/etc/passwd", "letters, digits"},
		{"../../v1/admin", "letters, digits"},
		{"a/../b", `no ".."`},
		{"gpt 4", "letters, digits"},
		{"gpt\n4", "letters, digits"},
		{"gpt\x00", "letters, digits"},
		{"gpt-é", "letters, digits"},
		{"-flag", "letters, digits"},
		{`a"b`, "letters, digits"},
	} {
		err := llm.ValidateModel(c.model)
		if !errors.Is(err, llm.ErrInvalidName) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateModel(%.40q): %v, want an invalid name saying %q", c.model, err, c.want)
		}
		if err != nil && len(err.Error()) > 512 {
			t.Errorf("ValidateModel(%.40q): a %d-byte message echoes the name", c.model, len(err.Error()))
		}
	}
}

func TestValidateProvider(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"openai", "local", "my_gateway.eu-1", "scripted"} {
		if err := llm.ValidateProvider(p); err != nil {
			t.Errorf("ValidateProvider(%q): %v", p, err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"", "empty"},
		{strings.Repeat("p", 65), "65 bytes, over the 64-byte limit"},
		{"../x", "letters, digits"},
		{"a b", "letters, digits"},
		{"a/b", "letters, digits"},
	} {
		err := llm.ValidateProvider(c.name)
		if !errors.Is(err, llm.ErrInvalidName) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateProvider(%q): %v, want %q", c.name, err, c.want)
		}
	}
}

// FuzzValidateModel checks the validator's contract on any input: it
// never panics, an accepted name is at most MaxModelBytes of the allowed
// ASCII characters with no "..", and an accepted scripted:<name> names no
// path.
func FuzzValidateModel(f *testing.F) {
	for _, s := range []string{"gpt-4o", "scripted", "scripted:a.yaml", "scripted:/etc/passwd", "a/../b", "@cf/x", "x\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := llm.ValidateModel(s)
		if err != nil {
			if !errors.Is(err, llm.ErrInvalidName) {
				t.Fatalf("error %v does not match ErrInvalidName", err)
			}
			return
		}
		if s == "" || len(s) > llm.MaxModelBytes || strings.Contains(s, "..") {
			t.Fatalf("accepted %q", s)
		}
		for _, r := range s {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@+-", r) {
				t.Fatalf("accepted %q with %q", s, r)
			}
		}
		if name, ok := strings.CutPrefix(s, "scripted:"); ok && (strings.ContainsAny(name, "/:@+") || name == "" || name[0] == '.') {
			t.Fatalf("accepted script name %q", name)
		}
	})
}

func TestLoadScriptIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := writeFile(t, "secret.yaml", "- the secret\n")
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.yaml", "- one\n- two\n")
	if err := os.Symlink(outside, filepath.Join(dir, "escape.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/fd/0", filepath.Join(dir, "stdin.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(llm.MaxScriptBytes + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()

	r, err := llm.LoadScriptIn(dir, "ok.yaml")
	if err != nil || len(r) != 2 || r[1].Content != "two" {
		t.Fatalf("ok.yaml: %v %v", r, err)
	}
	for _, c := range []struct{ name, want string }{
		{"escape.yaml", "escapes"}, // os.Root: "path escapes from parent"
		{"stdin.yaml", "escapes"},
		{"pipe.yaml", "not a regular file"},
		{"sub", "not a regular file"},
		{"big.yaml", "limit"},
		{"none.yaml", "no such file"},
		{"../" + filepath.Base(outside), "not a path"},
		{outside, "not a path"},
	} {
		done := make(chan error, 1)
		go func() { _, err := llm.LoadScriptIn(dir, c.name); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LoadScriptIn(%q): %v, want %q", c.name, err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "the secret") {
				t.Errorf("LoadScriptIn(%q) read the file outside the directory: %v", c.name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("LoadScriptIn(%q) blocked", c.name)
		}
	}
}

func TestResolveRefusesBadNames(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
	for _, c := range []struct {
		spec  llm.ProviderSpec
		model string
	}{
		{llm.ProviderSpec{}, strings.Repeat("x", 200_000)},
		{llm.ProviderSpec{}, "scripted:/etc/hostname"},
		{llm.ProviderSpec{}, "gpt 4"},
		{llm.ProviderSpec{Name: "../../etc"}, "gpt-4o"},
	} {
		_, _, err := llm.Resolve(c.spec, c.model, env)
		if !errors.Is(err, llm.ErrPermanent) || !errors.Is(err, llm.ErrInvalidName) || len(err.Error()) > 512 {
			t.Errorf("Resolve(%+v, %.30q): %.200v, want a short permanent invalid-name error", c.spec, c.model, err)
		}
	}
}

func TestConfiguredModels(t *testing.T) {
	t.Parallel()
	home := writeConfig(t, "providers:\n  a: {base_url: http://x/v1, model: cfg-model}\n  b: {base_url: http://y/v1}\n", 0o600)
	got := llm.ConfiguredModels(envOf(map[string]string{
		"RATH_HOME":            home,
		"OPENAI_DEFAULT_MODEL": "gpt-4o-mini",
		"RATH_MODELS":          " extra-1 ,bad name,," + strings.Repeat("x", 200) + ",gpt-4o-mini",
	}))
	want := []string{"scripted", "gpt-4o-mini", "cfg-model", "extra-1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ConfiguredModels = %q, want %q", got, want)
	}
}
