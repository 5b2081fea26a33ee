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

// Main runs rathctl with args and returns the process exit code: 0 on
// success, 2 for usage errors, 1 otherwise.
func Main(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	env := &Env{In: in, Out: out, Err: errOut}
	root := newRoot(env)
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(errOut, "rathctl: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRoot(env *Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "rathctl",
		Short:         "Rath: a distributed runtime for multi-agent, multi-session LLM systems",
		SilenceUsage:  true,
		SilenceErrors: true,
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
	root.AddCommand(lineageCmds(env)...)
	root.AddCommand(newRerunCmd(env))
	root.AddCommand(newRedactCmds(env)...)
	return root
}
