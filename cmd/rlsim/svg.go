package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

const (
	width, height   = 860, 260
	left, right     = 50, 20
	top, bottom     = 40, 40
	horizon         = 60 * time.Second
	admittedColour  = "#2e7d32"
	deniedColour    = "#c62828"
	cumulativeColor = "#1565c0"
)

func xOf(at time.Duration) float64 {
	return left + float64(at)/float64(horizon)*float64(width-left-right)
}

// plot draws admitted requests as green ticks above the axis, denied ones as
// red ticks below it, and the running count of admitted requests as a blue
// step line against the dashed line of the configured rate.
func plot(alg algorithms.Algorithm, lim algorithms.Limit, points []point) string {
	var b strings.Builder
	mid := float64(top+height-bottom) / 2
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s — %d requests / %s, burst %d</text>`+"\n", left, alg, lim.Requests, lim.Period, lim.Capacity())
	for s := time.Duration(0); s <= horizon; s += 10 * time.Second {
		x := xOf(s)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, height-bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n", x, height-bottom+16, int(s.Seconds()))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555"/>`+"\n", left, mid, width-right, mid)
	admitted := 0
	var steps []string
	rateEnd := float64(lim.Requests) * float64(horizon) / float64(lim.Period)
	maxCount := float64(lim.Capacity()) + rateEnd
	yOfCount := func(n int) float64 { return float64(height-bottom) - float64(n)/maxCount*float64(height-top-bottom) }
	steps = append(steps, fmt.Sprintf("%.1f,%.1f", xOf(0), yOfCount(0)))
	for _, p := range points {
		x := xOf(p.at)
		if p.allowed {
			admitted++
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", x, mid-4, x, mid-24, admittedColour)
			steps = append(steps, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x, yOfCount(admitted-1), x, yOfCount(admitted)))
		} else {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", x, mid+4, x, mid+24, deniedColour)
		}
	}
	steps = append(steps, fmt.Sprintf("%.1f,%.1f", xOf(horizon), yOfCount(admitted)))
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(steps, " "), cumulativeColor)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 4"/>`+"\n",
		xOf(0), yOfCount(int(lim.Capacity())), xOf(horizon), yOfCount(int(lim.Capacity())+int(rateEnd)), cumulativeColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">▲ admitted: %d</text>`+"\n", width-330, 20, admittedColour, admitted)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">▼ denied: %d</text>`+"\n", width-220, 20, deniedColour, len(points)-admitted)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">— running admitted (dashed: burst + rate)</text>`+"\n", left, height-6, cumulativeColor)
	b.WriteString("</svg>\n")
	return b.String()
}
