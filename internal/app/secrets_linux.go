//go:build linux

package app

import (
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
)

// reexec hands secrets over through a pipe and executes the binary again
// with env and args.
func reexec(secrets map[string]string, env, args []string) error {
	payload, err := json.Marshal(secrets)
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	if len(payload) > maxSecretsBytes {
		return fmt.Errorf("secrets: %d bytes of secrets in the environment and flags, over the %d-byte limit of the handover", len(payload), maxSecretsBytes)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], 0); err != nil { // no O_CLOEXEC: the read end survives exec
		return fmt.Errorf("secrets: pipe: %w", err)
	}
	syscall.CloseOnExec(p[1])
	if _, err := syscall.Write(p[1], payload); err != nil {
		return fmt.Errorf("secrets: write handover: %w", err)
	}
	_ = syscall.Close(p[1])
	env = append(env, secretsFDEnv+"="+strconv.Itoa(p[0]))
	// /proc/self/exe: the running binary even if its file was replaced.
	err = syscall.Exec("/proc/self/exe", args, env)
	_ = syscall.Close(p[0])
	return fmt.Errorf("secrets: re-execute without secrets in the environment: %w", err)
}

// nonDumpable sets PR_SET_DUMPABLE to 0.
func nonDumpable() error {
	const prSetDumpable = 4
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return fmt.Errorf("secrets: prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}
