// Command rlsim drives the Go reference of every algorithm with the same
// bursty traffic and draws, per algorithm, which requests were admitted and
// which were denied over time. docs/algorithms.md embeds its output:
//
//	go run ./cmd/rlsim -out docs/img/
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rlsim:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "docs/img", "directory for the SVG plots")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	traffic := burstyTraffic()
	for _, alg := range algorithms.All() {
		lim := simLimit(alg)
		points := simulate(lim, traffic)
		path := filepath.Join(*out, alg.String()+".svg")
		if err := os.WriteFile(path, []byte(plot(alg, lim, points)), 0o644); err != nil {
			return err
		}
		admitted := 0
		for _, p := range points {
			if p.allowed {
				admitted++
			}
		}
		fmt.Printf("%-15s %3d of %3d admitted -> %s\n", alg, admitted, len(points), path)
	}
	return nil
}

// simLimit is the same rate for every algorithm, 10 requests per 10 s, so
// the plots differ only by how each algorithm spends it.
func simLimit(alg algorithms.Algorithm) algorithms.Limit {
	lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: 10 * time.Second}
	if alg.Info().Bucket {
		lim.Burst = 10
	}
	return lim
}

// epoch is aligned to the 10 s window so fixed-window edges fall on 10, 20, ...
var epoch = time.Unix(1_800_000_000, 0)

type point struct {
	at      time.Duration
	allowed bool
}

func simulate(lim algorithms.Limit, traffic []time.Duration) []point {
	var st algorithms.State
	points := make([]point, 0, len(traffic))
	for _, at := range traffic {
		d, next := algorithms.Take(lim, st, 1, epoch.Add(at))
		if d.Allowed {
			st = next
		}
		points = append(points, point{at: at, allowed: d.Allowed})
	}
	return points
}
