package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Secrets in a process's environment or on its command line can be read
// by every process allowed to read /proc/<pid>/environ or cmdline: a tool
// on the local sandbox, running as the worker's user, reads its parent's.
// os.Unsetenv does not help: the kernel shows the environment block the
// process was started with. So a worker or coordinator that finds secrets
// there re-executes itself once, with them taken out of its environment
// and arguments and handed over through an inherited pipe; the new image
// puts them back into the Go environment (os.Getenv), which lives on the
// heap, not in the block /proc shows.

// secretsFDEnv names the inherited pipe's descriptor in the re-executed
// process.
const secretsFDEnv = "RATH_SECRETS_FD"

// maxSecretsBytes bounds what the pipe carries: the handover writes it
// before the re-exec, with nobody reading yet, so it must fit the pipe's
// buffer (64 KiB on Linux).
const maxSecretsBytes = 60 << 10

// FileSecrets are the variables that may be given as NAME_FILE, a path
// whose content (trailing newline trimmed) is the value: Kubernetes
// Secrets and compose secrets mounted as files. RATH_NATS_PASSWORD_FILE is
// read by the NATS connector itself.
var FileSecrets = []string{
	"RATH_STORE", "RATH_TOKEN",
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY",
	"OTEL_EXPORTER_OTLP_HEADERS",
}

// secretFlags maps the flags that may carry a password (a URL with user
// info or a password parameter) to the variable that is their default.
var secretFlags = map[string]string{"store": "RATH_STORE", "nats": "NATS_URL"}

// IsSecretEnv reports whether an environment variable holds a secret: the
// store URL, a token, a password, an API key or secret (by name), OTLP
// headers, or any URL with a password in it. Names ending in _FILE are
// paths, not secrets.
func IsSecretEnv(name, value string) bool {
	if value == "" || strings.HasSuffix(name, "_FILE") || name == secretsFDEnv {
		return false
	}
	switch name {
	case "RATH_STORE", "RATH_TOKEN", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS":
		return true
	}
	for _, suffix := range []string{"_KEY", "_TOKEN", "_PASSWORD", "_PASSWD", "_SECRET", "_CREDENTIALS"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return urlHasPassword(value)
}

func urlHasPassword(v string) bool {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" {
		return false
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	q := u.Query()
	return q.Has("password") || q.Has("sslpassword")
}

// HideSecrets makes sure the process's secrets are in no environment block
// or command line another process can read, and makes the process
// non-dumpable (PR_SET_DUMPABLE 0: /proc/<pid>/environ, mem and fd are
// then root's, and a process of the same user can neither read them nor
// ptrace it). Call it first thing in main of a long-running server.
//
// It reads NAME_FILE for each of [FileSecrets]. When the environment holds
// a secret ([IsSecretEnv]) or --store or --nats is given on the command
// line, it re-executes the binary (the same pid) without them, handing
// them over through a pipe; the new image puts them into the Go
// environment, so os.Getenv and flag defaults see them as before (a flag
// comes back as its variable, which the flag defaults to). It returns an
// error only before the re-exec or while taking the handover.
func HideSecrets() error {
	if fd := os.Getenv(secretsFDEnv); fd != "" {
		if err := takeSecrets(fd); err != nil {
			return err
		}
		return nonDumpable()
	}
	fromFiles, err := readFileSecrets(os.Getenv)
	if err != nil {
		return err
	}
	secrets, env, args := splitSecrets(os.Environ(), os.Args)
	if len(secrets) == 0 {
		for k, v := range fromFiles {
			if err := os.Setenv(k, v); err != nil {
				return fmt.Errorf("secrets: set %s: %w", k, err)
			}
		}
		return nonDumpable()
	}
	for k, v := range fromFiles {
		secrets[k] = v
	}
	return reexec(secrets, env, args)
}

// readFileSecrets reads NAME_FILE for each of FileSecrets; setting both
// NAME and NAME_FILE is an error naming both.
func readFileSecrets(getenv func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range FileSecrets {
		path := getenv(name + "_FILE")
		if path == "" {
			continue
		}
		if getenv(name) != "" {
			return nil, fmt.Errorf("secrets: set %s or %s_FILE, not both", name, name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("secrets: %s_FILE: %w", name, err)
		}
		out[name] = strings.TrimRight(string(b), "\r\n")
	}
	return out, nil
}

// splitSecrets takes the secrets out of env and args: it returns them by
// variable name, and env and args without them. A --store or --nats flag
// (any of -x V, --x V, -x=V, --x=V)
// becomes its variable, wherever it appears before a "--".
func splitSecrets(env, args []string) (secrets map[string]string, keep, rest []string) {
	secrets = map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if IsSecretEnv(k, v) {
			secrets[k] = v
			continue
		}
		keep = append(keep, kv)
	}
	rest = slices.Clone(args[:min(1, len(args))])
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") {
			// A positional argument, or the value of a flag that is not
			// a secret: the scan cannot tell which, and need not.
			rest = append(rest, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		envName, ok := secretFlags[name]
		if !ok {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				rest = append(rest, a) // let the flag set report the missing value
				continue
			}
			i++
			val = args[i]
		}
		if envName == "NATS_URL" && !urlHasPassword(val) {
			rest = append(rest, "--"+name+"="+val) // no password: stays a flag
			continue
		}
		secrets[envName] = val
	}
	return secrets, keep, rest
}

// takeSecrets reads the handover on fd into the Go environment.
func takeSecrets(fd string) error {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		return fmt.Errorf("secrets: %s=%q: want an inherited descriptor", secretsFDEnv, fd)
	}
	f := os.NewFile(uintptr(n), "secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretsBytes+1))
	if err != nil {
		return fmt.Errorf("secrets: read handover: %w", err)
	}
	var secrets map[string]string
	if err := json.Unmarshal(b, &secrets); err != nil {
		return fmt.Errorf("secrets: handover: %w", err)
	}
	if err := os.Unsetenv(secretsFDEnv); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	for k, v := range secrets {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("secrets: set %s: %w", k, err)
		}
	}
	return nil
}
