package storetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// RunHelpers starts n copies of the running test binary at once, each with
// env (NAME=VALUE) set and no tests selected, so that its TestMain acts as a
// helper process; it fails t unless every one exits 0.
func RunHelpers(t *testing.T, n int, env string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([]bytes.Buffer, n)
	for i := range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.count=1")
		cmd.Env = append(os.Environ(), env)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatalf("start helper %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cmd.Wait()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("helper process %d: %v\n%s", i, err, outs[i].String())
		}
	}
}
