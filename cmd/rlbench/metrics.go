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

// localHitsMetric counts the hits a replica answered from its leases.
const localHitsMetric = "ratelimitd_lease_local_hits_total"

// localHits is the sum of localHitsMetric over the target's ratelimitd
// replicas (0 for a target without leases, whose replicas do not export
// it, and for the floor and the model).
func (t *target) localHits() (float64, error) {
	if !t.leases() {
		return 0, nil
	}
	client := http.Client{Timeout: 5 * time.Second}
	sum := 0.0
	for _, addr := range t.debug {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0, err
		}
		v, err := metricSum(resp.Body, localHitsMetric)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("%s/metrics: %w", addr, err)
		}
		sum += v
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
