package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The lease metrics rlbench reads from a leasing target's replicas.
const (
	localHitsMetric = "ratelimitd_lease_local_hits_total"    // hits answered from leases
	blocksMetric    = "ratelimitd_lease_blocks_total"        // blocks taken
	returnedMetric  = "ratelimitd_lease_returned_hits_total" // unused hits given back
	refillsMetric   = "ratelimitd_lease_refills_total"       // blocks the sweeper took ahead
)

// leaseStats are those metrics summed over a target's replicas.
type leaseStats struct{ local, blocks, returned, refills float64 }

func (a leaseStats) sub(b leaseStats) leaseStats {
	return leaseStats{a.local - b.local, a.blocks - b.blocks, a.returned - b.returned, a.refills - b.refills}
}

// leaseStats reads the lease metrics of the target's ratelimitd replicas
// (zero for a target without leases, the floor and the model).
func (t *target) leaseStats() (leaseStats, error) {
	var sum leaseStats
	if !t.leases() {
		return sum, nil
	}
	client := http.Client{Timeout: 5 * time.Second}
	for _, addr := range t.debug {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			return sum, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return sum, err
		}
		for _, m := range []struct {
			name string
			to   *float64
		}{{localHitsMetric, &sum.local}, {blocksMetric, &sum.blocks}, {returnedMetric, &sum.returned}, {refillsMetric, &sum.refills}} {
			v, err := metricSum(strings.NewReader(string(body)), m.name)
			if err != nil {
				return sum, fmt.Errorf("%s/metrics: %w", addr, err)
			}
			*m.to += v
		}
	}
	return sum, nil
}

// metricSum adds up every sample of a metric in a Prometheus text
// exposition (0 if it has none).
func metricSum(r io.Reader, name string) (float64, error) {
	sum := 0.0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}
