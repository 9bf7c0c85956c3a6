package storetest

import (
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The sliding tables follow the doc comments of slidingLog and slidingWindow
// in pkg/algorithms.

func slidingLogSteps() []stepTable {
	never := algorithms.Never
	return []stepTable{{
		// At most 3 hits in any (now-10s, now].
		name:  "3_per_10s",
		limit: algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 3, Period: 10 * sec},
		steps: []step{
			{at: 0, hits: 1, want: allow(2, 10*sec)},
			{at: 2 * sec, hits: 1, want: allow(1, 10*sec)},
			{at: 2 * sec, hits: 1, want: allow(0, 10*sec)},      // same µs, second entry
			{at: 5 * sec, hits: 1, want: deny(0, 7*sec, 5*sec)}, // the 0s entry leaves at 10s
			{at: 5 * sec, hits: 2, want: deny(0, 7*sec, 7*sec)}, // both 2s entries must leave: 12s
			{at: 5 * sec, hits: 4, want: deny(0, 7*sec, never)}, // more than the window holds
			{at: 10 * sec, hits: 1, want: allow(0, 10*sec)},     // 0s entry is out: (0,10]
			{at: 12 * sec, hits: 0, want: allow(2, 8*sec)},      // 2s entries out; 10s entry left
			{at: 12 * sec, hits: 2, want: allow(0, 10*sec)},
			{at: 20 * sec, hits: 2, want: deny(1, 2*sec, 2*sec)}, // the 10s entry is out, the 12s one (2 hits) is in
			{at: 22 * sec, hits: 3, want: allow(0, 10*sec)},
		},
	}}
}

func slidingWindowSteps() []stepTable {
	never := algorithms.Never
	return []stepTable{{
		// 10 per 10s; count = cur + ceil(prev * (10s - elapsed) / 10s).
		name:  "10_per_10s",
		limit: algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 10 * sec},
		steps: []step{
			{at: 5 * sec, hits: 4, want: allow(6, 15*sec)},                  // counts until the window after next
			{at: 9 * sec, hits: 6, want: allow(0, 11*sec)},                  //
			{at: 9 * sec, hits: 1, want: deny(0, 11*sec, 2*sec)},            // at 11s prev 10 weighs ceil(9) = 9
			{at: 12 * sec, hits: 2, want: allow(0, 18*sec)},                 // prev weighs ceil(10*8/10) = 8
			{at: 15 * sec, hits: 0, want: allow(3, 15*sec)},                 // 2 + ceil(5) = 7
			{at: 15*sec + 500*ms, hits: 4, want: deny(3, 14500*ms, 500*ms)}, // 2 + ceil(4.5)=5; 4 fit at 16s
			{at: 16 * sec, hits: 4, want: allow(0, 14*sec)},                 // 2 + 4 + 4 = 10
			{at: 25 * sec, hits: 0, want: allow(7, 5*sec)},                  // prev 6 weighs ceil(3) = 3
			{at: 25 * sec, hits: 11, want: deny(7, 5*sec, never)},           // more than the limit
			{at: 30 * sec, hits: 1, want: allow(9, 20*sec)},                 // the state expired at 30s
		},
	}}
}
