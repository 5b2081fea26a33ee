package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/rath-run/rath/pkg/llm"
)

// redacted replaces an API key in `rathctl config show`.
const redacted = "[REDACTED]"

// providerNameRE is what a provider entry may be called.
var providerNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// configFlags locate the config file.
type configFlags struct {
	file   string
	output string
}

// path returns --file, else $RATH_HOME/config.yaml, else
// ~/.rath/config.yaml.
func (f *configFlags) path() (string, error) {
	if f.file != "" {
		return f.file, nil
	}
	return llm.ConfigPath(os.Getenv)
}

// load reads the config file; a missing file is an empty config.
func (f *configFlags) load() (string, *llm.Config, error) {
	path, err := f.path()
	if err != nil {
		return "", nil, err
	}
	c, err := llm.LoadConfig(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, &llm.Config{}, nil
	}
	if err != nil {
		return "", nil, err
	}
	return path, c, nil
}

func newConfigCmd(env *Env) *cobra.Command {
	var f configFlags
	c := &cobra.Command{
		Use:   "config",
		Short: "set up model providers in the config file ($RATH_HOME/config.yaml or ~/.rath/config.yaml)",
		Long: `The config file names model providers (see docs/models.md). It may hold API keys,
so rathctl writes it with mode 0600 and Rath refuses to read it when group or
others may. Prefer --api-key-env (the key stays in your environment) or
--api-key-stdin (the key stays out of your shell history) to --api-key.`,
	}
	c.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return checkOutput(c) } // the root's, which this one replaces
	c.PersistentFlags().StringVar(&f.file, "file", "", "config file (default $RATH_HOME/config.yaml, else ~/.rath/config.yaml)")
	c.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	c.AddCommand(newConfigPathCmd(env, &f), newConfigShowCmd(env, &f), newConfigSetProviderCmd(env, &f),
		newConfigRemoveProviderCmd(env, &f), newConfigUseCmd(env, &f))
	return c
}

func newConfigPathCmd(env *Env, f *configFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "path",
		Short: "print the config file's path",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, err := f.path()
			if err != nil {
				return err
			}
			if f.output == "json" {
				return json.NewEncoder(env.Out).Encode(map[string]string{"path": path})
			}
			_, err = fmt.Fprintln(env.Out, path)
			return err
		},
	}
}

// shownConfig is what `config show` prints: the providers with their keys
// redacted, and only the names of the file's other sections.
type shownConfig struct {
	Path            string                        `json:"path"`
	Exists          bool                          `json:"exists"`
	DefaultProvider string                        `json:"default_provider,omitempty"`
	Providers       map[string]llm.ProviderConfig `json:"providers"`
	OtherSections   []string                      `json:"other_sections,omitempty"`
}

func newConfigShowCmd(env *Env, f *configFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "print the configured providers, API keys redacted",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, c, err := f.load()
			if err != nil {
				return err
			}
			_, statErr := os.Stat(path)
			s := shownConfig{Path: path, Exists: statErr == nil, DefaultProvider: c.DefaultProvider,
				Providers: map[string]llm.ProviderConfig{}}
			for name, p := range c.Providers {
				if p.APIKey != "" {
					p.APIKey = redacted
				}
				s.Providers[name] = p
			}
			for k := range c.Other {
				s.OtherSections = append(s.OtherSections, k)
			}
			slices.Sort(s.OtherSections)
			if f.output == "json" {
				return json.NewEncoder(env.Out).Encode(s)
			}
			return printConfig(env.Out, s)
		},
	}
}

func printConfig(w io.Writer, s shownConfig) error {
	if !s.Exists {
		_, err := fmt.Fprintf(w, "# %s does not exist yet: add a provider with rathctl config set-provider\n", s.Path)
		return err
	}
	body := map[string]any{"providers": s.Providers}
	if s.DefaultProvider != "" {
		body["default_provider"] = s.DefaultProvider
	}
	js, err := json.Marshal(body)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "# %s (API keys redacted)\n%s", s.Path, y); err != nil {
		return err
	}
	if len(s.OtherSections) > 0 {
		_, err = fmt.Fprintf(w, "# other sections, not shown: %s\n", strings.Join(s.OtherSections, ", "))
	}
	return err
}

func newConfigSetProviderCmd(env *Env, f *configFlags) *cobra.Command {
	var (
		p           llm.ProviderConfig
		keyStdin    bool
		makeDefault bool
	)
	c := &cobra.Command{
		Use:   "set-provider NAME",
		Short: "add or update a provider entry (flags not given keep their current values)",
		Example: `  rathctl config set-provider openai --api-key-env OPENAI_API_KEY --model gpt-4o-mini --default
  rathctl config set-provider local --base-url http://localhost:11434/v1 --model llama3.2
  printf %s "$KEY" | rathctl config set-provider gateway --base-url https://llm.example.com/v1 --api-key-stdin --model m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !providerNameRE.MatchString(name) {
				return &exitError{code: 2, err: fmt.Errorf("provider name %q must match %s", name, providerNameRE)}
			}
			fl := cmd.Flags()
			keys := 0
			for _, k := range []string{"api-key", "api-key-env", "api-key-stdin"} {
				if fl.Changed(k) {
					keys++
				}
			}
			if keys > 1 {
				return &exitError{code: 2, err: errors.New("give at most one of --api-key, --api-key-env and --api-key-stdin")}
			}
			if keyStdin {
				key, err := readKey(env.In)
				if err != nil {
					return err
				}
				p.APIKey = key
			}
			path, c, err := f.load()
			if err != nil {
				return err
			}
			entry := c.Providers[name]
			set := func(flag string, dst *string, v string) {
				if fl.Changed(flag) {
					*dst = v
				}
			}
			set("kind", &entry.Kind, p.Kind)
			set("base-url", &entry.BaseURL, p.BaseURL)
			set("model", &entry.Model, p.Model)
			set("api-version", &entry.APIVersion, p.APIVersion)
			// A key and a key variable exclude each other: api_key would
			// silently win over a newly set api_key_env.
			switch {
			case fl.Changed("api-key") || keyStdin:
				entry.APIKey, entry.APIKeyEnv = p.APIKey, ""
			case fl.Changed("api-key-env"):
				entry.APIKey, entry.APIKeyEnv = "", p.APIKeyEnv
			}
			if err := checkProvider(entry); err != nil {
				return &exitError{code: 2, err: err}
			}
			if c.Providers == nil {
				c.Providers = map[string]llm.ProviderConfig{}
			}
			_, existed := c.Providers[name]
			c.Providers[name] = entry
			if makeDefault {
				c.DefaultProvider = name
			}
			if err := llm.SaveConfig(path, c); err != nil {
				return err
			}
			verb := "added"
			if existed {
				verb = "updated"
			}
			return f.report(env, path, map[string]any{"provider": name, "action": verb, "default": c.DefaultProvider == name},
				fmt.Sprintf("%s provider %s in %s", verb, name, path))
		},
	}
	fl := c.Flags()
	fl.StringVar(&p.Kind, "kind", "", "openai (any OpenAI-compatible endpoint, the default), azure or anthropic")
	fl.StringVar(&p.BaseURL, "base-url", "", "endpoint base URL, e.g. http://localhost:11434/v1")
	fl.StringVar(&p.Model, "model", "", "default model for this provider")
	fl.StringVar(&p.APIVersion, "api-version", "", "API version (Azure)")
	fl.StringVar(&p.APIKeyEnv, "api-key-env", "", "name of the environment variable that holds the key (the file does not hold it)")
	fl.StringVar(&p.APIKey, "api-key", "", "the API key itself, stored in the file (it shows in your shell history: prefer --api-key-stdin)")
	fl.BoolVar(&keyStdin, "api-key-stdin", false, "read the API key from standard input")
	fl.BoolVar(&makeDefault, "default", false, "make this the default provider")
	return c
}

// readKey reads one line, the key, from r.
func readKey(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the API key from stdin: %w", err)
	}
	key := strings.TrimSpace(line)
	if key == "" {
		return "", &exitError{code: 2, err: errors.New("--api-key-stdin: standard input held no key")}
	}
	return key, nil
}

// checkProvider refuses entries Rath could not use.
func checkProvider(p llm.ProviderConfig) error {
	switch p.Kind {
	case "", llm.KindOpenAI, llm.KindAzure, llm.KindAnthropic:
	default:
		return fmt.Errorf("--kind %q is not openai, azure or anthropic", p.Kind)
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--base-url %q is not an http(s) URL", p.BaseURL)
		}
	}
	if p.APIKeyEnv != "" && !envNameRE.MatchString(p.APIKeyEnv) {
		return fmt.Errorf("--api-key-env %q is not an environment variable name", p.APIKeyEnv)
	}
	if strings.ContainsAny(p.APIKey, " \t\r\n") {
		return errors.New("--api-key holds whitespace")
	}
	if p.BaseURL == "" && p.Kind != llm.KindAnthropic && p.APIKey == "" && p.APIKeyEnv == "" {
		return errors.New("a provider needs --base-url or a key (--api-key-env, --api-key-stdin or --api-key)")
	}
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func newConfigRemoveProviderCmd(env *Env, f *configFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "remove-provider NAME",
		Short: "remove a provider entry (and the default, if it was the default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path, c, err := f.load()
			if err != nil {
				return err
			}
			name := args[0]
			if _, ok := c.Providers[name]; !ok {
				return fmt.Errorf("no provider %q in %s", name, path)
			}
			delete(c.Providers, name)
			if c.DefaultProvider == name {
				c.DefaultProvider = ""
			}
			if err := llm.SaveConfig(path, c); err != nil {
				return err
			}
			return f.report(env, path, map[string]any{"provider": name, "action": "removed"},
				fmt.Sprintf("removed provider %s from %s", name, path))
		},
	}
}

func newConfigUseCmd(env *Env, f *configFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "make a configured provider the default",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path, c, err := f.load()
			if err != nil {
				return err
			}
			name := args[0]
			if _, ok := c.Providers[name]; !ok {
				names := slices.Sorted(maps.Keys(c.Providers))
				return fmt.Errorf("no provider %q in %s (it has: %s)", name, path, strings.Join(names, ", "))
			}
			c.DefaultProvider = name
			if err := llm.SaveConfig(path, c); err != nil {
				return err
			}
			return f.report(env, path, map[string]any{"provider": name, "action": "default"},
				fmt.Sprintf("default provider is now %s (%s)", name, path))
		},
	}
}

// report prints a command's outcome as text or JSON.
func (f *configFlags) report(env *Env, path string, v map[string]any, text string) error {
	if f.output == "json" {
		v["path"] = path
		return json.NewEncoder(env.Out).Encode(v)
	}
	_, err := fmt.Fprintln(env.Out, text)
	return err
}
