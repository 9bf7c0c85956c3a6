package main

import (
	"math/rand/v2"
	"slices"
	"time"
)

// burstyTraffic is 60 s of a steady trickle plus bursts, one of them
// straddling the fixed-window edge at 30 s, from a fixed seed so the plots are
// reproducible.
func burstyTraffic() []time.Duration {
	rng := rand.New(rand.NewPCG(7, 11))
	var out []time.Duration
	for t := time.Duration(0); t < 60*time.Second; t += 1500 * time.Millisecond {
		out = append(out, t+time.Duration(rng.Int64N(int64(500*time.Millisecond))))
	}
	burst := func(start, length time.Duration, n int) {
		for range n {
			out = append(out, start+time.Duration(rng.Int64N(int64(length))))
		}
	}
	burst(4*time.Second, time.Second, 25)
	burst(29*time.Second, 2*time.Second, 30)
	burst(44*time.Second, 500*time.Millisecond, 15)
	slices.Sort(out)
	return out
}
