// Package cli implements rathctl's commands. Each command writes to the
// injected streams only, so every command is testable in-process with
// [Main].
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/internal/runs"
	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/session"
)

// Env is what every command gets: its output streams.
type Env struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit codes (docs/cli.md): what Main returns.
const (
	exitOK       = 0 // the command did what it was asked
	exitFailed   = 1 // it failed (including: no coordinator where one was expected)
	exitUsage    = 2 // bad flags, arguments or -o
	exitWaiting  = 3 // the run it watched waits for an approval decision
	exitNotFound = 4 // the run, version, token or file it names does not exist
)

// Main runs rathctl with args and returns the process exit code (see the
// constants above).
func Main(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	env := &Env{In: in, Out: out, Err: errOut}
	root := newRoot(env)
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	err = noCoordinator(err)
	fmt.Fprintf(errOut, "rathctl: %v\n", err)
	return exitCode(err)
}

// exitCode maps a command's error to the process exit code.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, session.ErrNotFound), errors.Is(err, client.ErrNotFound), errors.Is(err, runs.ErrNotFound):
		return exitNotFound
	}
	return exitFailed
}

func newRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "rathctl",
		Short:         "Rath: a distributed runtime for multi-agent, multi-session LLM systems",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command's -o is checked here once (a command with its own
		// PersistentPreRunE, config, checks it there).
		PersistentPreRunE: func(c *cobra.Command, _ []string) error { return checkOutput(c) },
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: 2, err: fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	root.AddCommand(newDemoCmd(env), newDevCmd(env), newRunCmd(env), newRunsCmd(env))
	root.AddCommand(newSessionCmd(env), newMigrateCmd(env))
	root.AddCommand(newConfigCmd(env))
	root.AddCommand(newMemoryCmd(env))
	root.AddCommand(newLoginCmd(env), newTokenCmd(env))
	root.AddCommand(newCheckCmd(env))
	root.AddCommand(newBenchCmd(env))
	root.AddCommand(newApprovalCmds(env)...)
	root.AddCommand(newReviewCmd(env))
	root.AddCommand(lineageCmds(env)...)
	root.AddCommand(newRerunCmd(env))
	root.AddCommand(newRedactCmds(env)...)
	root.AddCommand(newExportCmd(env), newLabelCmd(env))
	usageArgs(root)
	return root
}

// usageArgs makes a wrong number or shape of arguments a usage error (exit
// 2), on every command below c.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}
