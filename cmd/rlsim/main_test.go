package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The plots in docs/img are committed; this keeps them in step with the
// algorithms (regenerate with `go run ./cmd/rlsim -out docs/img`).
func TestCommittedPlotsAreCurrent(t *testing.T) {
	traffic := burstyTraffic()
	for _, alg := range algorithms.All() {
		lim := simLimit(alg)
		want := plot(alg, lim, simulate(lim, traffic))
		got, err := os.ReadFile(filepath.Join("..", "..", "docs", "img", alg.String()+".svg"))
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if string(got) != want {
			t.Errorf("docs/img/%s.svg is stale: run go run ./cmd/rlsim -out docs/img", alg)
		}
	}
}

func TestSimulationShapes(t *testing.T) {
	traffic := burstyTraffic()
	admitted := map[algorithms.Algorithm]int{}
	for _, alg := range algorithms.All() {
		for _, p := range simulate(simLimit(alg), traffic) {
			if p.allowed {
				admitted[alg]++
			}
		}
	}
	// Over 60 s at 10 per 10 s, a window can admit at most 6 windows' worth
	// (fixed window: 70 with the partial seventh) and a bucket its burst plus
	// the refill.
	for alg, n := range admitted {
		if n == 0 || n > 70 {
			t.Errorf("%s admitted %d", alg, n)
		}
	}
	// The fixed window lets a burst straddling the 30 s edge through twice;
	// the sliding window must admit fewer in the two seconds around it.
	edge := func(alg algorithms.Algorithm) int {
		n := 0
		for _, p := range simulate(simLimit(alg), traffic) {
			if p.allowed && p.at >= 29*time.Second && p.at < 31*time.Second {
				n++
			}
		}
		return n
	}
	if fw, sw := edge(algorithms.FixedWindow), edge(algorithms.SlidingWindow); sw >= fw {
		t.Errorf("around the window edge fixed_window admitted %d, sliding_window %d: want sliding < fixed", fw, sw)
	}
}
