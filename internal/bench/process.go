package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rath-run/rath/internal/cpustat"
)

// Process is a process of a remote target whose CPU time the steps
// scenario reports per step (rathctl bench --server … --process): a
// coordinator, a worker, a NATS server. Read returns the CPU time the
// process has used so far.
type Process struct {
	// Name is the process's name in the report ("coordinator", "w1").
	Name string
	// Source says where its CPU time is read: "pid:N" or a /metrics URL.
	Source string
	Read   func(ctx context.Context) (time.Duration, error)
}

// MetricsCPU is the metric a /metrics source is read from: the Prometheus
// Go client's process collector exports it (the coordinator and workers
// serve it).
const MetricsCPU = "process_cpu_seconds_total"

// maxMetricsBytes bounds a /metrics response the bench reads.
const maxMetricsBytes = 16 << 20

// ParseProcess parses a --process value, NAME=pid:PID (a process on this
// machine, read from /proc) or NAME=URL (an http or https URL serving
// Prometheus' text format with process_cpu_seconds_total). hc fetches
// URLs (nil: http.DefaultClient).
func ParseProcess(s string, hc *http.Client) (Process, error) {
	name, src, ok := strings.Cut(s, "=")
	name, src = strings.TrimSpace(name), strings.TrimSpace(src)
	if !ok || name == "" || src == "" {
		return Process{}, fmt.Errorf("%q: want NAME=pid:PID or NAME=URL of a /metrics endpoint", s)
	}
	p := Process{Name: name, Source: src}
	if n, isPID := strings.CutPrefix(src, "pid:"); isPID {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			return Process{}, fmt.Errorf("%q: pid %q is not a positive integer", s, n)
		}
		p.Read = func(context.Context) (time.Duration, error) {
			d, ok := cpustat.Process(pid)
			if !ok {
				return 0, fmt.Errorf("process %d: no /proc/%d/stat on this machine", pid, pid)
			}
			return d, nil
		}
		return p, nil
	}
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Process{}, fmt.Errorf("%q: %q is neither pid:PID nor an http(s) URL", s, src)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	p.Read = func(ctx context.Context) (time.Duration, error) { return metricsCPU(ctx, hc, src) }
	return p, nil
}

// metricsCPU reads process_cpu_seconds_total from the /metrics endpoint
// at u.
func metricsCPU(ctx context.Context, hc *http.Client, u string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", u, resp.Status)
	}
	d, err := ParseMetricsCPU(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", u, err)
	}
	return d, nil
}

// errNoCPUMetric: the text has no process_cpu_seconds_total sample.
var errNoCPUMetric = errors.New("no " + MetricsCPU + " in the metrics")

// ParseMetricsCPU reads process_cpu_seconds_total from Prometheus' text
// format (one sample: a process's own; several are summed).
func ParseMetricsCPU(r io.Reader) (time.Duration, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	f, ok := fams[MetricsCPU]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, errNoCPUMetric
	}
	var s float64
	for _, m := range f.GetMetric() {
		s += sampleValue(m)
	}
	if math.IsNaN(s) || s < 0 || s > float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("metrics: %s = %v: not a CPU time", MetricsCPU, s)
	}
	return time.Duration(s * float64(time.Second)), nil
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}
