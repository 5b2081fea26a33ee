package llm

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// Model and provider names come from agent specs, which tenants write, so
// they are names and never host resources: a model name is at most
// [MaxModelBytes] of [A-Za-z0-9._:/@+-], starting with a letter, a digit
// or "@", with no ".."; a provider name is at most [MaxProviderBytes] of
// [A-Za-z0-9._-], starting with a letter or a digit. That covers the names
// providers use (gpt-4o-mini, claude-sonnet-4-5, llama3.2:latest,
// meta-llama/Llama-3.1-8B-Instruct, @cf/meta/llama-3-8b-instruct,
// anthropic.claude-3-haiku-20240307-v1:0).
//
// "scripted:<name>" is the scripted model with its replies in the file
// <name> of the directory the worker's operator names (RATH_SCRIPT_DIR):
// a file name ([A-Za-z0-9][A-Za-z0-9._-]*), never a path.
const (
	MaxModelBytes    = 128
	MaxProviderBytes = 64
)

// ErrInvalidName matches (errors.Is) every error of [ValidateModel] and
// [ValidateProvider]; their messages are the reason alone, so that callers
// can prefix the field ("model: 900001 bytes, over the 128-byte limit").
var ErrInvalidName = errors.New("rath: invalid name")

type nameError struct{ msg string }

func (e *nameError) Error() string        { return e.msg }
func (e *nameError) Is(target error) bool { return target == ErrInvalidName }

func invalidName(format string, args ...any) error {
	return &nameError{msg: fmt.Sprintf(format, args...)}
}

var (
	modelRE      = regexp.MustCompile(`^[A-Za-z0-9@][A-Za-z0-9._:/@+-]*$`)
	providerRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	scriptNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// ValidateModel checks a model name (see the rules above). The error
// names the limit or the allowed characters, and quotes the name only
// when it is within the length limit.
func ValidateModel(model string) error {
	switch {
	case model == "":
		return invalidName("required")
	case len(model) > MaxModelBytes:
		return invalidName("%d bytes, over the %d-byte limit", len(model), MaxModelBytes)
	}
	if name, ok := strings.CutPrefix(model, ScriptedModel+":"); ok {
		if !scriptNameRE.MatchString(name) || strings.Contains(name, "..") {
			return invalidName("%q: a scripted model's script is a file name in the worker's RATH_SCRIPT_DIR (%s, no \"..\"), not a path; or use model scripted with the replies inline as script",
				model, scriptNameRE)
		}
		return nil
	}
	if !modelRE.MatchString(model) || strings.Contains(model, "..") {
		return invalidName("%q: a model name is letters, digits and . _ : / @ + - (%s), with no \"..\"", model, modelRE)
	}
	return nil
}

// ValidateProvider checks a provider name: the name of a config file
// entry, or "scripted".
func ValidateProvider(name string) error {
	switch {
	case name == "":
		return invalidName("empty")
	case len(name) > MaxProviderBytes:
		return invalidName("%d bytes, over the %d-byte limit", len(name), MaxProviderBytes)
	case !providerRE.MatchString(name):
		return invalidName("%q: a provider name is letters, digits and . _ - (%s)", name, providerRE)
	}
	return nil
}

// LoadScriptIn reads the script file name from the directory dir, as
// "scripted:<name>" does on a worker: name must be a file name (see
// [ValidateModel]); the file is opened through an [os.Root] on dir, so
// neither ".." nor a symbolic link leads out of it; it must be a regular
// file (it is opened non-blocking and checked before it is read, so a
// FIFO or a device never holds the caller) of at most [MaxScriptBytes].
func LoadScriptIn(dir, name string) ([]ScriptReply, error) {
	if err := ValidateModel(ScriptedModel + ":" + name); err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("load script: script directory: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("load script %s: %w", name, err)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("load script %s: not a regular file (%s)", name, st.Mode().Type())
	case st.Size() > MaxScriptBytes:
		return nil, fmt.Errorf("load script %s: %d bytes, limit %d", name, st.Size(), MaxScriptBytes)
	}
	data, err := readLimited(f, MaxScriptBytes)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", name, err)
	}
	replies, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", name, err)
	}
	return replies, nil
}

// ConfiguredModels lists the models a process's operator configured:
// "scripted", OPENAI_DEFAULT_MODEL, ANTHROPIC_DEFAULT_MODEL, the models of
// the config file's providers ([ConfigPath]; an unreadable file adds
// none), and RATH_MODELS, a comma-separated list of further model names
// (for models that specs name but no default names). Invalid names are
// dropped. Metrics label only these models.
func ConfiguredModels(getenv func(string) string) []string {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	seen := map[string]bool{}
	var out []string
	add := func(m string) {
		m = strings.TrimSpace(m)
		if !seen[m] && ValidateModel(m) == nil {
			seen[m] = true
			out = append(out, m)
		}
	}
	add(ScriptedModel)
	add(getenv("OPENAI_DEFAULT_MODEL"))
	add(getenv("ANTHROPIC_DEFAULT_MODEL"))
	if p, err := ConfigPath(getenv); err == nil {
		if c, err := LoadConfig(p); err == nil {
			for _, name := range c.providerNames() {
				add(c.Providers[name].Model)
			}
		}
	}
	for m := range strings.SplitSeq(getenv("RATH_MODELS"), ",") {
		add(m)
	}
	return out
}
