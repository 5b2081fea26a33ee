package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"sigs.k8s.io/yaml"
)

// MaxConfigBytes bounds the config file.
const MaxConfigBytes = 1 << 20

// Config is the user's config file ($RATH_HOME/config.yaml, else
// ~/.rath/config.yaml). This package reads its providers; other top-level
// sections belong to other parts of Rath and are kept as they are by
// [SaveConfig].
//
//	default_provider: openai
//	providers:
//	  openai:
//	    api_key: sk-…
//	    model: gpt-4o-mini
//	  local:
//	    base_url: http://localhost:11434/v1
//	    model: llama3.2
//
// The file holds API keys, so [LoadConfig] refuses it unless only its owner
// can read it (mode 0600 or stricter).
type Config struct {
	// DefaultProvider names the entry used when none is named. When empty
	// and there is exactly one provider, that one is the default.
	DefaultProvider string
	Providers       map[string]ProviderConfig
	// Other holds the file's other top-level keys, verbatim.
	Other map[string]json.RawMessage
}

// ProviderConfig is one provider entry. Unknown fields are refused, so a
// misspelled key is an error rather than a silently missing setting.
type ProviderConfig struct {
	// Kind is "openai" (the default: any OpenAI-compatible endpoint),
	// "azure" (Azure OpenAI deployments) or "anthropic" (Anthropic's
	// OpenAI-compatible endpoint; base_url defaults to it).
	Kind    string `json:"kind,omitempty"`
	BaseURL string `json:"base_url,omitempty"`
	APIKey  string `json:"api_key,omitempty"`
	// APIKeyEnv names an environment variable holding the key, so the
	// file need not hold it; api_key wins when both are set.
	APIKeyEnv  string `json:"api_key_env,omitempty"`
	Model      string `json:"model,omitempty"`
	APIVersion string `json:"api_version,omitempty"`
}

// Provider kinds.
const (
	KindOpenAI    = "openai"
	KindAzure     = "azure"
	KindAnthropic = "anthropic"
)

// AnthropicBaseURL is Anthropic's OpenAI-compatible endpoint.
const AnthropicBaseURL = "https://api.anthropic.com/v1/"

// ConfigPath returns the config file's path: $RATH_HOME/config.yaml, else
// $HOME/.rath/config.yaml. getenv reads the environment.
func ConfigPath(getenv func(string) string) (string, error) {
	if h := getenv("RATH_HOME"); h != "" {
		return filepath.Join(h, "config.yaml"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".rath", "config.yaml"), nil
	}
	return "", errors.New("config path: neither RATH_HOME nor HOME is set")
}

// LoadConfig reads the config file at path. A missing file is an error
// wrapping fs.ErrNotExist. A file that group or others may read or write is
// refused, as is one over [MaxConfigBytes].
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("config %s has mode %04o; it may hold API keys, so only its owner may read it: run chmod 600 %s",
			path, st.Mode().Perm(), path)
	}
	data, err := readLimited(f, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

func parseConfig(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	c := &Config{Other: map[string]json.RawMessage{}}
	if t := bytes.TrimSpace(js); bytes.Equal(t, []byte("null")) {
		return c, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, errors.New("the file must be a mapping of sections")
	}
	for k, v := range top {
		switch k {
		case "default_provider":
			if err := json.Unmarshal(v, &c.DefaultProvider); err != nil {
				return nil, errors.New("default_provider must be a string")
			}
		case "providers":
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(v, &raw); err != nil {
				return nil, errors.New("providers must be a mapping of names to entries")
			}
			c.Providers = make(map[string]ProviderConfig, len(raw))
			for name, e := range raw {
				var pc ProviderConfig
				dec := json.NewDecoder(bytes.NewReader(e))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&pc); err != nil {
					return nil, fmt.Errorf("providers.%s: %w", name, err)
				}
				switch pc.Kind {
				case "", KindOpenAI, KindAzure, KindAnthropic:
				default:
					return nil, fmt.Errorf("providers.%s: kind %q is not openai, azure or anthropic", name, pc.Kind)
				}
				c.Providers[name] = pc
			}
		default:
			c.Other[k] = v
		}
	}
	if c.DefaultProvider != "" {
		if _, ok := c.Providers[c.DefaultProvider]; !ok {
			return nil, fmt.Errorf("default_provider %q is not among the providers (%v)", c.DefaultProvider, c.providerNames())
		}
	}
	return c, nil
}

// SaveConfig writes c to path atomically with mode 0600, creating the
// directory (mode 0700) if needed.
func SaveConfig(path string, c *Config) error {
	top := map[string]any{}
	for k, v := range c.Other {
		top[k] = v
	}
	if c.DefaultProvider != "" {
		top["default_provider"] = c.DefaultProvider
	}
	if len(c.Providers) > 0 {
		top["providers"] = c.Providers
	}
	js, err := json.Marshal(top)
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	out, err := yaml.JSONToYAML(js)
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(out)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("save config %s: %w", path, err)
	}
	return nil
}

// providerNames lists the configured provider names, sorted.
func (c *Config) providerNames() []string {
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// defaultEntry returns the default provider entry, if one is determined.
func (c *Config) defaultEntry() (string, ProviderConfig, bool) {
	if c.DefaultProvider != "" {
		return c.DefaultProvider, c.Providers[c.DefaultProvider], true
	}
	if len(c.Providers) == 1 {
		for n, p := range c.Providers {
			return n, p, true
		}
	}
	return "", ProviderConfig{}, false
}
