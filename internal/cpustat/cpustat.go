// Package cpustat reads CPU time: this process's, and another local
// process's from /proc (Linux). Benchmarks report CPU per operation with
// it, which on a shared machine is steadier than time per operation.
package cpustat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Process returns the CPU time (user + system) process pid has used, from
// /proc/PID/stat; false where it cannot be read.
func Process(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command, which may hold spaces, in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTicks, true
}

// Processes sums Process over pids; false if any cannot be read.
func Processes(pids []int32) (time.Duration, bool) {
	var total time.Duration
	for _, pid := range pids {
		t, ok := Process(int(pid))
		if !ok {
			return 0, false
		}
		total += t
	}
	return total, true
}
