package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CrashAt parses RATH_TEST_CRASH_AT ("point" or "point:round", a
// worker.Crash constant and a 1-based round, 0 or none for any) into a
// worker.Config.CrashAt that kills the process with SIGKILL when the step
// reaches that point: the fault tests stop a real worker dead at a named
// point of a step. "" returns nil. Never set it in production.
func CrashAt(spec string) (func(point string, round int), error) {
	if spec == "" {
		return nil, nil
	}
	point, r, _ := strings.Cut(spec, ":")
	round := 0
	if r != "" {
		n, err := strconv.Atoi(r)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("RATH_TEST_CRASH_AT %q: the round after ':' must be a number ≥ 0", spec)
		}
		round = n
	}
	return func(p string, rd int) {
		if p == point && (round == 0 || rd == round || rd == 0) {
			fmt.Fprintf(os.Stderr, "RATH_TEST_CRASH_AT: crashing at %s (round %d)\n", p, rd)
			p, err := os.FindProcess(os.Getpid())
			if err == nil {
				_ = p.Kill()
			}
			os.Exit(137)
		}
	}, nil
}
