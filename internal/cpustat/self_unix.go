//go:build unix

package cpustat

import (
	"syscall"
	"time"
)

// Self returns the CPU time (user + system) this process has used; false
// where it cannot be read.
func Self() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
