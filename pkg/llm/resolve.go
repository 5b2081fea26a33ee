package llm

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ProviderSpec names a provider explicitly, in code or an agent spec. Empty
// fields are unset.
type ProviderSpec struct {
	// Name selects a provider entry of the config file; the other fields
	// override that entry's.
	Name       string
	BaseURL    string
	APIKey     string
	Model      string
	Azure      bool
	APIVersion string
}

// DefaultScript is the scripted model's script when none is given.
var defaultScript = []ScriptReply{{
	Content: "Hello from Rath's scripted model. Set RATH_SCRIPT to a YAML or JSON list of replies, or configure an OpenAI-compatible endpoint, to get real answers.",
}}

// Resolve builds the Provider for model, in OpenRath's order, and returns
// it with the resolved model name. getenv reads the environment (nil reads
// nothing); this package never reads it itself.
//
// Model and spec.Name are names, checked by [ValidateModel] and
// [ValidateProvider]; a bad one is a permanent error.
//
// The scripted model: model "scripted" gives a [*Scripted] whose replies
// come from the file named by RATH_SCRIPT (or a one-reply greeting), and
// "scripted:<name>" one whose replies come from the file <name> of the
// directory RATH_SCRIPT_DIR names ([LoadScriptIn]); without
// RATH_SCRIPT_DIR that form is refused. Both variables are the operator's:
// a spec never names a path.
//
// Otherwise the endpoint is configured from three layers, highest first:
//
//  1. spec: its fields, over the config file entry spec.Name names;
//  2. the environment: OPENAI_API_KEY / OPENAI_BASE_URL /
//     OPENAI_DEFAULT_MODEL; else AZURE_OPENAI_API_KEY (or AZURE_API_KEY) /
//     AZURE_OPENAI_ENDPOINT / OPENAI_API_VERSION (or
//     AZURE_OPENAI_API_VERSION); else ANTHROPIC_API_KEY /
//     ANTHROPIC_BASE_URL / ANTHROPIC_DEFAULT_MODEL with Anthropic's
//     OpenAI-compatible endpoint. A model named claude-… prefers the
//     Anthropic variables when ANTHROPIC_API_KEY is set and OPENAI_BASE_URL
//     is not. The environment is not consulted for the endpoint when
//     spec.Name is set;
//  3. the config file ([ConfigPath]): its default provider.
//
// The base URL and key are taken field by field from layers 1 and 2 (so a
// spec's BaseURL may be used with OPENAI_API_KEY, as in OpenRath); only when
// neither layer sets either does the endpoint come, whole, from the config
// file, so a key stored in the file is only ever sent to its own entry's
// endpoint. The model is the first of: model, spec.Model, the
// environment's default model, the config entry's model.
//
// A config file that others can read is refused (see [LoadConfig]). When
// nothing names an endpoint, or no model or (for OpenAI's and Anthropic's
// own endpoints) no key is found, the error wraps [ErrNotConfigured], which
// callers may answer by using the scripted model.
func Resolve(spec ProviderSpec, model string, getenv func(string) string) (Provider, string, error) {
	const op = "resolve"
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if model != "" {
		if err := ValidateModel(model); err != nil {
			return nil, "", &Error{Op: op, cause: err, Message: "model: " + err.Error()}
		}
	}
	if spec.Name != "" {
		if err := ValidateProvider(spec.Name); err != nil {
			return nil, "", &Error{Op: op, cause: err, Message: "provider: " + err.Error()}
		}
	}
	if model == ScriptedModel || spec.Name == ScriptedModel {
		replies := defaultScript
		if path := getenv("RATH_SCRIPT"); path != "" {
			r, err := LoadScript(path)
			if err != nil {
				return nil, "", permanentf(op, "RATH_SCRIPT: %v", err)
			}
			replies = r
		}
		return &Scripted{Replies: replies}, ScriptedModel, nil
	}
	if name, ok := strings.CutPrefix(model, ScriptedModel+":"); ok {
		dir := getenv("RATH_SCRIPT_DIR")
		if dir == "" {
			return nil, "", permanentf(op, "model %s: no script directory here (the operator sets RATH_SCRIPT_DIR); use model %s with the replies inline as script", model, ScriptedModel)
		}
		r, err := LoadScriptIn(dir, name)
		if err != nil {
			return nil, "", permanentf(op, "%v", err)
		}
		return &Scripted{Replies: r}, ScriptedModel, nil
	}

	var cfg *Config
	loadCfg := func(required bool) error {
		if cfg != nil {
			return nil
		}
		p, err := ConfigPath(getenv)
		if err != nil {
			if required {
				return permanentf(op, "provider %q: %v", spec.Name, err)
			}
			return nil
		}
		c, err := LoadConfig(p)
		if errors.Is(err, fs.ErrNotExist) && !required {
			return nil
		}
		if err != nil {
			return permanentf(op, "%v", err)
		}
		cfg = c
		return nil
	}

	// Layer 1: the spec, over its named config entry.
	top := endpoint{base: spec.BaseURL, key: spec.APIKey, model: spec.Model, azure: spec.Azure, version: spec.APIVersion}
	var env endpoint
	if spec.Name != "" {
		if err := loadCfg(true); err != nil {
			return nil, "", err
		}
		pc, ok := cfg.Providers[spec.Name]
		if !ok {
			return nil, "", &Error{Op: op, cause: ErrNotConfigured, Message: fmt.Sprintf(
				"provider %q is not in the config file (it has: %v)", spec.Name, cfg.providerNames())}
		}
		top = top.over(fromConfig(pc, getenv))
	} else {
		env = fromEnv(getenv, model)
	}
	ep := top.over(env)
	if ep.base == "" && ep.key == "" {
		if err := loadCfg(false); err != nil {
			return nil, "", err
		}
		if cfg != nil {
			if _, pc, ok := cfg.defaultEntry(); ok {
				m := ep.model
				ep = fromConfig(pc, getenv)
				if m != "" {
					ep.model = m
				}
			}
		}
	} else if ep.model == "" && model == "" && spec.Name == "" {
		// Only the model is missing: the config file may still name one.
		if err := loadCfg(false); err != nil {
			return nil, "", err
		}
		if cfg != nil {
			if _, pc, ok := cfg.defaultEntry(); ok {
				ep.model = pc.Model
			}
		}
	}
	if model != "" {
		ep.model = model
	}

	// The config file's path is not named: a worker's error reaches the
	// tenant whose step failed, and the worker's file layout is none of its
	// business (docs/models.md says where the file is).
	where := "set OPENAI_API_KEY (with OPENAI_BASE_URL and OPENAI_DEFAULT_MODEL as needed), pass a provider, or add one to the config file ($RATH_HOME/config.yaml)"
	switch {
	case ep.base == "" && ep.key == "":
		return nil, "", &Error{Op: op, cause: ErrNotConfigured, Message: fmt.Sprintf(
			"%v: %s; or use model %q", ErrNotConfigured, where, ScriptedModel)}
	case ep.key == "" && (ep.base == "" || ep.base == DefaultOpenAIBaseURL || ep.base == AnthropicBaseURL):
		return nil, "", &Error{Op: op, cause: ErrNotConfigured, Message: fmt.Sprintf(
			"%v: no API key for %s: %s", ErrNotConfigured, orDefault(ep.base, DefaultOpenAIBaseURL), where)}
	case ep.model == "":
		return nil, "", &Error{Op: op, cause: ErrNotConfigured, Message: fmt.Sprintf(
			"%v: no model: name one, set OPENAI_DEFAULT_MODEL, or set model in the config file", ErrNotConfigured)}
	}
	p, err := NewOpenAI(OpenAIConfig{BaseURL: ep.base, APIKey: ep.key, Model: ep.model, Azure: ep.azure, APIVersion: ep.version})
	if err != nil {
		return nil, "", err
	}
	return p, ep.model, nil
}

// endpoint is one configuration layer.
type endpoint struct {
	base, key, model string
	azure            bool
	version          string
}

// over fills e's empty fields from lower. Azure and the API version follow
// the base URL: they come from lower only when the base URL does.
func (e endpoint) over(lower endpoint) endpoint {
	out := e
	if out.base == "" {
		out.base = lower.base
		out.azure = out.azure || lower.azure
		if out.version == "" {
			out.version = lower.version
		}
	}
	out.key = orDefault(out.key, lower.key)
	out.model = orDefault(out.model, lower.model)
	return out
}

func fromConfig(pc ProviderConfig, getenv func(string) string) endpoint {
	e := endpoint{base: pc.BaseURL, key: pc.APIKey, model: pc.Model, version: pc.APIVersion}
	if e.key == "" && pc.APIKeyEnv != "" {
		e.key = getenv(pc.APIKeyEnv)
	}
	switch pc.Kind {
	case KindAzure:
		e.azure = true
	case KindAnthropic:
		e.base = orDefault(e.base, AnthropicBaseURL)
	}
	return e
}

func fromEnv(getenv func(string) string, model string) endpoint {
	anthropic := func() endpoint {
		return endpoint{
			base:  orDefault(getenv("ANTHROPIC_BASE_URL"), AnthropicBaseURL),
			key:   getenv("ANTHROPIC_API_KEY"),
			model: getenv("ANTHROPIC_DEFAULT_MODEL"),
		}
	}
	if strings.HasPrefix(model, "claude") && getenv("ANTHROPIC_API_KEY") != "" && getenv("OPENAI_BASE_URL") == "" {
		return anthropic()
	}
	if getenv("OPENAI_API_KEY") != "" || getenv("OPENAI_BASE_URL") != "" {
		return endpoint{base: getenv("OPENAI_BASE_URL"), key: getenv("OPENAI_API_KEY"), model: getenv("OPENAI_DEFAULT_MODEL")}
	}
	if ep := getenv("AZURE_OPENAI_ENDPOINT"); ep != "" || getenv("AZURE_OPENAI_API_KEY") != "" {
		e := endpoint{
			base:    ep,
			key:     orDefault(getenv("AZURE_OPENAI_API_KEY"), getenv("AZURE_API_KEY")),
			model:   getenv("OPENAI_DEFAULT_MODEL"),
			version: orDefault(getenv("OPENAI_API_VERSION"), getenv("AZURE_OPENAI_API_VERSION")),
		}
		// Azure's v1 endpoint speaks the plain OpenAI protocol.
		e.azure = !strings.Contains(ep, "/openai/v1")
		if !e.azure {
			e.version = ""
		}
		return e
	}
	if getenv("ANTHROPIC_API_KEY") != "" {
		return anthropic()
	}
	return endpoint{model: getenv("OPENAI_DEFAULT_MODEL")}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
