package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
)

// Plot renders s as a self-contained SVG line chart with linear axes
// from zero, tick labels, and a marker per point. It needs no fonts or
// scripts beyond what any SVG viewer has.
func Plot(s Series) []byte {
	const (
		w, h                   = 640, 400
		left, right, top, bott = 80, 20, 40, 60
	)
	pw, ph := float64(w-left-right), float64(h-top-bott)
	var maxX, maxY float64
	for _, p := range s.Points {
		maxX = math.Max(maxX, p.X)
		maxY = math.Max(maxY, p.Y)
	}
	xt, yt := ticks(maxX), ticks(maxY)
	maxX, maxY = xt[len(xt)-1], yt[len(yt)-1]
	px := func(x float64) float64 { return float64(left) + x/maxX*pw }
	py := func(y float64) float64 { return float64(top) + ph - y/maxY*ph }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(s.Title))
	for _, t := range yt {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, w-right, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, num(t))
	}
	for _, t := range xt {
		x := px(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, h-bott)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, h-bott+16, num(t))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bott, w-right, h-bott)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bott)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+pw/2, h-16, html.EscapeString(s.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", float64(top)+ph/2, html.EscapeString(s.YLabel))
	if len(s.Points) > 0 {
		b.WriteString(`<polyline fill="none" stroke="#1f6feb" stroke-width="2" points="`)
		for i, p := range s.Points {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", px(p.X), py(p.Y))
		}
		b.WriteString("\"/>\n")
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#1f6feb"><title>%s, %s</title></circle>`+"\n", px(p.X), py(p.Y), num(p.X), num(p.Y))
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// ticks returns 0 and evenly spaced round values covering max (at least
// one step above 0).
func ticks(max float64) []float64 {
	if !(max > 0) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []float64
	for t := 0.0; ; t += step {
		ts = append(ts, t)
		if t >= max*(1-1e-9) {
			return ts
		}
	}
}
