package lineage

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParsePrice reads a model's price as MODEL=PROMPT/COMPLETION, in US
// dollars per million tokens (rathctl dossier --price, the dossier
// endpoint's ?price=).
func ParsePrice(s string) (string, Price, error) {
	model, rest, ok := strings.Cut(s, "=")
	in, out, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || model == "" {
		return "", Price{}, fmt.Errorf("price %q: want MODEL=PROMPT/COMPLETION (USD per million tokens)", s)
	}
	a, err1 := strconv.ParseFloat(in, 64)
	b, err2 := strconv.ParseFloat(out, 64)
	if err := errors.Join(err1, err2); err != nil || !finite(a) || !finite(b) || a < 0 || b < 0 {
		return "", Price{}, fmt.Errorf("price %q: prices must be non-negative numbers", s)
	}
	return model, Price{Prompt: a, Completion: b}, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
