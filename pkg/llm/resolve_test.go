package llm_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rath-run/rath/pkg/llm"
	"github.com/rath-run/rath/pkg/llm/llmtest"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeConfig writes a config file under a fresh RATH_HOME with mode perm.
func writeConfig(t *testing.T, body string, perm os.FileMode) string {
	t.Helper()
	home := t.TempDir()
	p := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(p, []byte(body), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return home
}

// resolveAndCall resolves, makes one call, and reports which server saw it
// with which credentials.
func resolveAndCall(t *testing.T, spec llm.ProviderSpec, model string, env map[string]string, servers ...*llmtest.Server) (string, int, llmtest.Request) {
	t.Helper()
	p, resolved, err := llm.Resolve(spec, model, envOf(env))
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	before := make([]int, len(servers))
	for i, s := range servers {
		s.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Content: "ok"} })
		before[i] = len(s.Requests())
	}
	if _, err := p.Chat(t.Context(), userReq("hi")); err != nil {
		t.Fatalf("Chat: %v", err)
	}
	for i, s := range servers {
		if r := s.Requests(); len(r) > before[i] {
			return resolved, i, r[len(r)-1]
		}
	}
	t.Fatal("no server saw the call")
	return "", 0, llmtest.Request{}
}

func TestResolveOrder(t *testing.T) {
	t.Parallel()
	specSrv, envSrv, cfgSrv := llmtest.NewServer(t), llmtest.NewServer(t), llmtest.NewServer(t)
	home := writeConfig(t, `
default_provider: mine
providers:
  mine:
    base_url: `+cfgSrv.URL()+`
    api_key: key-from-config
    model: config-model
  other:
    base_url: `+cfgSrv.URL()+`
    api_key_env: OTHER_KEY
    model: other-model
coordinator: {url: "http://kept-for-others"}
`, 0o600)
	env := map[string]string{
		"RATH_HOME":            home,
		"OPENAI_API_KEY":       "key-from-env",
		"OPENAI_BASE_URL":      envSrv.URL(),
		"OPENAI_DEFAULT_MODEL": "env-model",
		"OTHER_KEY":            "other-key-from-env",
	}
	all := []*llmtest.Server{specSrv, envSrv, cfgSrv}

	t.Run("spec beats env", func(t *testing.T) {
		model, srv, r := resolveAndCall(t, llm.ProviderSpec{BaseURL: specSrv.URL(), APIKey: "key-from-spec", Model: "spec-model"}, "", env, all...)
		if srv != 0 || model != "spec-model" || r.Header.Get("Authorization") != "Bearer key-from-spec" || r.Model != "spec-model" {
			t.Errorf("server %d model %q auth %q", srv, model, r.Header.Get("Authorization"))
		}
	})
	t.Run("spec base url with env key", func(t *testing.T) {
		_, srv, r := resolveAndCall(t, llm.ProviderSpec{BaseURL: specSrv.URL()}, "", env, all...)
		if srv != 0 || r.Header.Get("Authorization") != "Bearer key-from-env" || r.Model != "env-model" {
			t.Errorf("server %d auth %q model %q", srv, r.Header.Get("Authorization"), r.Model)
		}
	})
	t.Run("model argument wins", func(t *testing.T) {
		model, _, r := resolveAndCall(t, llm.ProviderSpec{Model: "spec-model"}, "arg-model", env, all...)
		if model != "arg-model" || r.Model != "arg-model" {
			t.Errorf("model %q sent %q", model, r.Model)
		}
	})
	t.Run("env beats config", func(t *testing.T) {
		model, srv, r := resolveAndCall(t, llm.ProviderSpec{}, "", env, all...)
		if srv != 1 || model != "env-model" || r.Header.Get("Authorization") != "Bearer key-from-env" {
			t.Errorf("server %d model %q auth %q", srv, model, r.Header.Get("Authorization"))
		}
	})
	t.Run("config when env is empty", func(t *testing.T) {
		model, srv, r := resolveAndCall(t, llm.ProviderSpec{}, "", map[string]string{"RATH_HOME": home}, all...)
		if srv != 2 || model != "config-model" || r.Header.Get("Authorization") != "Bearer key-from-config" {
			t.Errorf("server %d model %q auth %q", srv, model, r.Header.Get("Authorization"))
		}
	})
	t.Run("config model fills a missing env model", func(t *testing.T) {
		e := map[string]string{"RATH_HOME": home, "OPENAI_BASE_URL": envSrv.URL(), "OPENAI_API_KEY": "k"}
		model, srv, _ := resolveAndCall(t, llm.ProviderSpec{}, "", e, all...)
		if srv != 1 || model != "config-model" {
			t.Errorf("server %d model %q", srv, model)
		}
	})
	t.Run("named provider ignores env", func(t *testing.T) {
		model, srv, r := resolveAndCall(t, llm.ProviderSpec{Name: "other"}, "", env, all...)
		if srv != 2 || model != "other-model" || r.Header.Get("Authorization") != "Bearer other-key-from-env" {
			t.Errorf("server %d model %q auth %q", srv, model, r.Header.Get("Authorization"))
		}
	})
	t.Run("named provider with overrides", func(t *testing.T) {
		model, srv, r := resolveAndCall(t, llm.ProviderSpec{Name: "mine", Model: "override", BaseURL: specSrv.URL()}, "", env, all...)
		if srv != 0 || model != "override" || r.Header.Get("Authorization") != "Bearer key-from-config" {
			t.Errorf("server %d model %q auth %q", srv, model, r.Header.Get("Authorization"))
		}
	})
	t.Run("unknown name", func(t *testing.T) {
		_, _, err := llm.Resolve(llm.ProviderSpec{Name: "nope"}, "", envOf(env))
		if !errors.Is(err, llm.ErrNotConfigured) || !strings.Contains(err.Error(), "[mine other]") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestResolveHomeFallbackAndMode(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".rath"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, ".rath", "config.yaml")
	body := "providers:\n  only:\n    base_url: " + srv.URL() + "\n    api_key: key-in-file-SECRET\n    model: m\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	// The single provider is the default.
	model, _, r := resolveAndCall(t, llm.ProviderSpec{}, "", map[string]string{"HOME": home}, srv)
	if model != "m" || r.Header.Get("Authorization") != "Bearer key-in-file-SECRET" {
		t.Errorf("model %q auth %q", model, r.Header.Get("Authorization"))
	}
	for _, perm := range []os.FileMode{0o644, 0o640, 0o604, 0o660} {
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		_, _, err := llm.Resolve(llm.ProviderSpec{}, "", envOf(map[string]string{"HOME": home}))
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+p) || !errors.Is(err, llm.ErrPermanent) {
			t.Errorf("mode %o: err = %v", perm, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("mode error leaks the file's key: %v", err)
		}
		if _, err := llm.LoadConfig(p); err == nil {
			t.Errorf("LoadConfig accepted mode %o", perm)
		}
	}
	if err := os.Chmod(p, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := llm.LoadConfig(p); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
}

func TestResolveEnvironmentVariants(t *testing.T) {
	t.Parallel()
	t.Run("azure", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		env := map[string]string{
			"AZURE_OPENAI_API_KEY":  "azure-key",
			"AZURE_OPENAI_ENDPOINT": srv.BaseURL(),
			"OPENAI_API_VERSION":    "2025-01-01",
		}
		model, _, r := resolveAndCall(t, llm.ProviderSpec{}, "my-deploy", env, srv)
		if model != "my-deploy" || r.Path != "/openai/deployments/my-deploy/chat/completions" ||
			r.RawQuery != "api-version=2025-01-01" || r.Header.Get("api-key") != "azure-key" {
			t.Errorf("model %q path %q query %q", model, r.Path, r.RawQuery)
		}
	})
	t.Run("azure v1 endpoint is plain openai", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		env := map[string]string{"AZURE_OPENAI_API_KEY": "azure-key", "AZURE_OPENAI_ENDPOINT": srv.BaseURL() + "/openai/v1"}
		_, _, r := resolveAndCall(t, llm.ProviderSpec{}, "gpt-x", env, srv)
		if r.Path != "/openai/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer azure-key" {
			t.Errorf("path %q auth %q", r.Path, r.Header.Get("Authorization"))
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		env := map[string]string{"ANTHROPIC_API_KEY": "ant-key", "ANTHROPIC_BASE_URL": srv.URL(), "ANTHROPIC_DEFAULT_MODEL": "claude-x"}
		model, _, r := resolveAndCall(t, llm.ProviderSpec{}, "", env, srv)
		if model != "claude-x" || r.Header.Get("Authorization") != "Bearer ant-key" {
			t.Errorf("model %q auth %q", model, r.Header.Get("Authorization"))
		}
	})
	t.Run("claude model prefers anthropic", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		env := map[string]string{"OPENAI_API_KEY": "oa", "ANTHROPIC_API_KEY": "ant-key", "ANTHROPIC_BASE_URL": srv.URL()}
		_, _, r := resolveAndCall(t, llm.ProviderSpec{}, "claude-sonnet", env, srv)
		if r.Header.Get("Authorization") != "Bearer ant-key" {
			t.Errorf("auth %q", r.Header.Get("Authorization"))
		}
	})
	t.Run("anthropic default url", func(t *testing.T) {
		t.Parallel()
		p, model, err := llm.Resolve(llm.ProviderSpec{}, "claude-x", envOf(map[string]string{"ANTHROPIC_API_KEY": "k"}))
		if err != nil || model != "claude-x" || p == nil {
			t.Errorf("%v %q", err, model)
		}
	})
	t.Run("local server without key", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t)
		_, _, r := resolveAndCall(t, llm.ProviderSpec{}, "", map[string]string{"OPENAI_BASE_URL": srv.URL(), "OPENAI_DEFAULT_MODEL": "llama"}, srv)
		if r.Header.Get("Authorization") != "" || r.Model != "llama" {
			t.Errorf("auth %q model %q", r.Header.Get("Authorization"), r.Model)
		}
	})
}

func TestResolveNotConfigured(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		env  map[string]string
		spec llm.ProviderSpec
		want string
	}{
		"nothing":           {env: map[string]string{"HOME": t.TempDir()}, want: "no model provider configured"},
		"no home":           {env: nil, want: "no model provider configured"},
		"key without model": {env: map[string]string{"OPENAI_API_KEY": "k"}, want: "no model"},
		"model without key": {env: map[string]string{"OPENAI_DEFAULT_MODEL": "gpt"}, want: "no model provider configured"},
		"spec model only":   {spec: llm.ProviderSpec{Model: "gpt"}, want: "no model provider configured"},
		"openai url no key": {spec: llm.ProviderSpec{BaseURL: llm.DefaultOpenAIBaseURL, Model: "m"}, want: "no API key"},
	}
	for name, c := range cases {
		_, _, err := llm.Resolve(c.spec, "", envOf(c.env))
		if !errors.Is(err, llm.ErrNotConfigured) || !errors.Is(err, llm.ErrPermanent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrNotConfigured saying %q", name, err, c.want)
		}
	}
}

func TestResolveScripted(t *testing.T) {
	t.Parallel()
	p, model, err := llm.Resolve(llm.ProviderSpec{}, "scripted", nil)
	if err != nil || model != "scripted" {
		t.Fatalf("%v %q", err, model)
	}
	if r, err := p.Chat(t.Context(), llm.Request{}); err != nil || r.Content == "" {
		t.Errorf("default script: %v %v", r, err)
	}
	path := writeFile(t, "s.yaml", "- one\n- two\n")
	p, _, err = llm.Resolve(llm.ProviderSpec{}, "scripted", envOf(map[string]string{"RATH_SCRIPT": path}))
	if err != nil || len(p.(*llm.Scripted).Replies) != 2 {
		t.Fatalf("RATH_SCRIPT: %v", err)
	}
	// scripted:<name> reads <name> from the operator's RATH_SCRIPT_DIR.
	dirEnv := envOf(map[string]string{"RATH_SCRIPT_DIR": filepath.Dir(path)})
	p, _, err = llm.Resolve(llm.ProviderSpec{}, "scripted:"+filepath.Base(path), dirEnv)
	if err != nil || p.(*llm.Scripted).Replies[1].Content != "two" {
		t.Fatalf("scripted:name: %v", err)
	}
	bad := writeFile(t, "bad.yaml", "- contnet: x\n")
	badEnv := envOf(map[string]string{"RATH_SCRIPT_DIR": filepath.Dir(bad)})
	if _, _, err := llm.Resolve(llm.ProviderSpec{}, "scripted:bad.yaml", badEnv); err == nil || !strings.Contains(err.Error(), "entry 0") {
		t.Errorf("bad script: %v", err)
	}
	// A path is never a script name, and without RATH_SCRIPT_DIR there is
	// no file form at all.
	if _, _, err := llm.Resolve(llm.ProviderSpec{}, "scripted:"+path, dirEnv); !errors.Is(err, llm.ErrPermanent) || !errors.Is(err, llm.ErrInvalidName) {
		t.Errorf("scripted:<absolute path>: %v, want a permanent invalid name", err)
	}
	if _, _, err := llm.Resolve(llm.ProviderSpec{}, "scripted:"+filepath.Base(path), nil); !errors.Is(err, llm.ErrPermanent) || !strings.Contains(fmt.Sprint(err), "RATH_SCRIPT_DIR") {
		t.Errorf("scripted:name without RATH_SCRIPT_DIR: %v", err)
	}
}

func TestConfigSaveLoad(t *testing.T) {
	t.Parallel()
	home := writeConfig(t, "coordinator:\n  url: http://x\nproviders:\n  a: {model: m1}\n", 0o600)
	p := filepath.Join(home, "config.yaml")
	c, err := llm.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	c.Providers["b"] = llm.ProviderConfig{Kind: llm.KindAnthropic, APIKeyEnv: "ANTHROPIC_API_KEY", Model: "claude-x"}
	c.DefaultProvider = "b"
	out := filepath.Join(t.TempDir(), "sub", "config.yaml")
	if err := llm.SaveConfig(out, c); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("saved mode %v %v", st.Mode(), err)
	}
	back, err := llm.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.DefaultProvider != "b" || back.Providers["a"].Model != "m1" || back.Providers["b"].Kind != "anthropic" ||
		string(back.Other["coordinator"]) != `{"url":"http://x"}` {
		t.Errorf("round trip = %+v", back)
	}
	for body, want := range map[string]string{
		"providers:\n  a: {api-key: x}\n":      `providers.a: json: unknown field "api-key"`,
		"providers:\n  a: {kind: bedrock}\n":   `kind "bedrock"`,
		"default_provider: z\nproviders: {}\n": `default_provider "z"`,
		"- a\n":                                "must be a mapping",
		"providers: 3\n":                       "providers must be a mapping",
	} {
		h := writeConfig(t, body, 0o600)
		if _, err := llm.LoadConfig(filepath.Join(h, "config.yaml")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
}

// TestResolveErrorsNameNoHostPath: a worker's resolve error becomes the
// run's error, which the tenant reads, so it names the provider and the
// configured names but not where the worker keeps its config file.
func TestResolveErrorsNameNoHostPath(t *testing.T) {
	home := writeConfig(t, "providers:\n  ours:\n    base_url: http://127.0.0.1:1/v1\n    api_key: k\n    model: m\n", 0o600)
	empty := t.TempDir()
	for _, tc := range []struct {
		home  string
		spec  llm.ProviderSpec
		model string
		want  string
	}{
		{home, llm.ProviderSpec{Name: "theirs"}, "m", `provider "theirs" is not in the config file (it has: [ours])`},
		{empty, llm.ProviderSpec{}, "gpt-x", "no model provider configured"},
	} {
		_, _, err := llm.Resolve(tc.spec, tc.model, envOf(map[string]string{"RATH_HOME": tc.home}))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.home) {
			t.Errorf("Resolve(%+v, %q): %v; want %q and not the path %s", tc.spec, tc.model, err, tc.want, tc.home)
		}
	}
}
