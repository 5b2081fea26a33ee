package bench

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// In-process, the load generator (the bench's drivers, its API client and
// the client's HTTP transport) runs in the stack's process, and the
// process's CPU time counts it. loadShare estimates its part from a CPU
// profile of the loaded phase, when one is taken (Config.LoadedProfile):
// the share of the samples whose stack holds one of its functions. The
// stack itself makes no HTTP calls with the scripted model, so the
// transport's goroutines are the client's. The collector's work for the
// load generator's allocations is not counted in it.

// errNoLoadedProfile: the loaded phase was not profiled, so the load
// generator's share is not known (--cpuprofile-loaded profiles it).
var errNoLoadedProfile = errors.New("the loaded phase was not profiled")

// loadFrames are the prefixes of the load generator's function names.
var loadFrames = []string{
	"github.com/rath-run/rath/internal/bench.",
	"github.com/rath-run/rath/pkg/client.",
	"net/http.(*persistConn).",
	"net/http.(*Transport).",
}

// isLoadFrame reports a function of the load generator.
func isLoadFrame(fn string) bool {
	return slices.ContainsFunc(loadFrames, func(p string) bool { return strings.HasPrefix(fn, p) })
}

// loadShare returns the share of the CPU time in prof (a CPU profile, as
// pprof.StartCPUProfile writes it) that the load generator spent.
func loadShare(prof []byte) (float64, error) {
	p, err := profile.Parse(bytes.NewReader(prof))
	if err != nil {
		return 0, fmt.Errorf("read the loaded phase's CPU profile: %w", err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return 0, errors.New("the loaded phase's CPU profile has no cpu samples")
	}
	var total, load int64
	for _, s := range p.Sample {
		v := s.Value[cpu]
		total += v
		if fromLoad(s) {
			load += v
		}
	}
	if total == 0 {
		return 0, errors.New("the loaded phase's CPU profile is empty")
	}
	return float64(load) / float64(total), nil
}

// fromLoad reports a sample taken in the load generator's code.
func fromLoad(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && isLoadFrame(l.Function.Name) {
				return true
			}
		}
	}
	return false
}
