package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// step is one Take of hits on the table's key at Epoch()+at, with the decision
// worked out by hand from the algorithm's doc comment in pkg/algorithms.
type step struct {
	at   time.Duration
	hits uint64
	want algorithms.Decision
}

type stepTable struct {
	name  string
	limit algorithms.Limit
	steps []step
}

func allow(remaining uint64, reset time.Duration) algorithms.Decision {
	return algorithms.Decision{Allowed: true, Remaining: remaining, ResetAfter: reset}
}

func deny(remaining uint64, reset, retry time.Duration) algorithms.Decision {
	return algorithms.Decision{Remaining: remaining, ResetAfter: reset, RetryAfter: retry}
}

// stepTables are keyed by algorithm; every algorithm must have at least one
// (runSteps fails for one missing here).
func stepTables() map[algorithms.Algorithm][]stepTable {
	return map[algorithms.Algorithm][]stepTable{
		algorithms.FixedWindow:   fixedWindowSteps(),
		algorithms.SlidingLog:    slidingLogSteps(),
		algorithms.SlidingWindow: slidingWindowSteps(),
		algorithms.TokenBucket:   tokenBucketSteps(),
		algorithms.LeakyBucket:   leakyBucketSteps(),
		algorithms.GCRA:          gcraSteps(),
	}
}

func runSteps(t *testing.T, newStore Factory) {
	tables := stepTables()
	for _, a := range algorithms.All() {
		if len(tables[a]) == 0 {
			t.Errorf("%s has no step table: write one worked out from its doc comment", a)
		}
		for _, tc := range tables[a] {
			t.Run(a.String()+"/"+tc.name, func(t *testing.T) {
				if tc.limit.Algorithm != a {
					t.Fatalf("table %q is filed under %s but limits with %s", tc.name, a, tc.limit.Algorithm)
				}
				if err := tc.limit.Validate(); err != nil {
					t.Fatalf("table %q: invalid limit: %v", tc.name, err)
				}
				h := newHarness(t, newStore)
				for i, s := range tc.steps {
					h.at(s.at)
					h.expect(fmt.Sprintf("step %d (t=%s, %d hits)", i, s.at, s.hits),
						reqs(req("step", tc.limit, s.hits)), decisions(s.want))
				}
			})
		}
	}
}
