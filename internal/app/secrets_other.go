//go:build !linux

package app

import "errors"

// reexec is Linux-only: elsewhere a process with secrets in its
// environment or flags refuses to start (use NAME_FILE).
func reexec(map[string]string, []string, []string) error {
	return errors.New("secrets: secrets in the environment or on the command line can only be hidden on Linux; give them as NAME_FILE")
}

// nonDumpable is a no-op off Linux.
func nonDumpable() error { return nil }
