//go:build !unix

package cpustat

import "time"

// Self is not measured on this platform.
func Self() (time.Duration, bool) { return 0, false }
