package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Figure is one measured figure and its ratio to the limit it is bounded
// by. For a rate, Ratio is Value/LimitValue (1 = as fast as the limit);
// for a latency, Ratio is Value/LimitValue too (1 = as slow as the limit,
// lower is better). HigherIsBetter says which way to read it.
type Figure struct {
	Scenario       string  `json:"scenario"`
	Name           string  `json:"name"`
	Value          float64 `json:"value"`
	Unit           string  `json:"unit"`
	Limit          string  `json:"limit,omitempty"`
	LimitValue     float64 `json:"limit_value,omitempty"`
	Ratio          float64 `json:"ratio,omitempty"`
	HigherIsBetter bool    `json:"higher_is_better"`
}

// Limit is one measured machine limit.
type Limit struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	How   string  `json:"how"`
}

// Point is one (x, y) sample of a growth series.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Series is a growth curve: cost against work.
type Series struct {
	Name   string  `json:"name"`
	Title  string  `json:"title"`
	XLabel string  `json:"x_label"`
	YLabel string  `json:"y_label"`
	Points []Point `json:"points"`
}

// Report is what a bench run produces: the JSON report's schema.
type Report struct {
	Started time.Time `json:"started"`
	Elapsed float64   `json:"elapsed_s"`
	Target  string    `json:"target"`
	Machine Machine   `json:"machine"`
	Limits  []Limit   `json:"limits"`
	Figures []Figure  `json:"figures"`
	Series  []Series  `json:"series,omitempty"`
	// CPU is CPU time per step by process, from the steps scenario's
	// loaded phase.
	CPU       []ProcessCPU `json:"cpu_per_step,omitempty"`
	Notes     []string     `json:"notes,omitempty"`
	Scenarios []string     `json:"scenarios"`
}

// ProcessCPU is the CPU time one process (or group of processes) spent
// per step. NA, when set, says why it was not measured ("n/a (remote)");
// PerStepUS is then 0.
type ProcessCPU struct {
	Process   string  `json:"process"`
	PerStepUS float64 `json:"per_step_us"`
	NA        string  `json:"na,omitempty"`
	// InTotal: counted in the "total" row (the shared Postgres background
	// processes are not: they also serve other databases).
	InTotal bool `json:"in_total"`
}

// Machine describes where the bench ran.
type Machine struct {
	GOOS    string  `json:"goos"`
	GOARCH  string  `json:"goarch"`
	CPUs    int     `json:"cpus"`
	Go      string  `json:"go"`
	Load1   float64 `json:"load1,omitempty"`
	CPUName string  `json:"cpu,omitempty"`
}

func thisMachine() Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		_, _ = fmt.Sscan(string(b), &m.Load1)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUName = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func (r *Report) limit(name string) (Limit, bool) {
	for _, l := range r.Limits {
		if l.Name == name {
			return l, true
		}
	}
	return Limit{}, false
}

// add records a figure, computing its ratio to the named limit when that
// limit was measured.
func (r *Report) add(f Figure) {
	if f.Limit != "" && f.LimitValue == 0 {
		if l, ok := r.limit(f.Limit); ok {
			f.LimitValue = l.Value
		}
	}
	if f.LimitValue > 0 {
		f.Ratio = f.Value / f.LimitValue
	}
	r.Figures = append(r.Figures, f)
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the limits, then every figure with its ratio.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "LIMIT\tVALUE\tHOW\n")
	for _, l := range r.Limits {
		fmt.Fprintf(tw, "%s\t%s %s\t%s\n", l.Name, num(l.Value), l.Unit, l.How)
	}
	fmt.Fprintf(tw, "\nSCENARIO\tFIGURE\tVALUE\tLIMIT\tRATIO\n")
	for _, f := range r.Figures {
		ratio, lim := "-", "-"
		if f.LimitValue > 0 {
			ratio = fmt.Sprintf("%.2f×", f.Ratio)
			lim = fmt.Sprintf("%s (%s)", f.Limit, num(f.LimitValue))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\n", f.Scenario, f.Name, num(f.Value), f.Unit, lim, ratio)
	}
	if len(r.CPU) > 0 {
		fmt.Fprintf(tw, "\nPROCESS\tCPU PER STEP\n")
		for _, c := range r.CPU {
			v := fmt.Sprintf("%s µs", num(c.PerStepUS))
			if c.NA != "" {
				v = c.NA
			}
			fmt.Fprintf(tw, "%s\t%s\n", c.Process, v)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || (v == math.Trunc(v) && a < 1e15):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// quantile returns the p-quantile of ds in milliseconds (ds is sorted in
// place); 0 for none.
func quantile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := min(int(p*float64(len(ds))), len(ds)-1)
	return ms(ds[i])
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
