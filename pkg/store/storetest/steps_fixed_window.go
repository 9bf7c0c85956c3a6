package storetest

import (
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

const (
	ms  = time.Millisecond
	sec = time.Second
	us  = time.Microsecond
)

func fixedWindowSteps() []stepTable {
	never := algorithms.Never
	return []stepTable{{
		// Windows [0,10s), [10s,20s), ... aligned to the epoch; 3 per window.
		name:  "3_per_10s",
		limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Period: 10 * sec},
		steps: []step{
			{at: 0, hits: 1, want: allow(2, 10*sec)},
			{at: 1 * sec, hits: 2, want: allow(0, 9*sec)},
			{at: 2 * sec, hits: 1, want: deny(0, 8*sec, 8*sec)},
			{at: 3 * sec, hits: 0, want: allow(0, 7*sec)},
			{at: 9*sec + 500*ms, hits: 4, want: deny(0, 500*ms, never)},
			{at: 10 * sec, hits: 3, want: allow(0, 10*sec)},
			{at: 15 * sec, hits: 1, want: deny(0, 5*sec, 5*sec)},
			// 20s..30s is never touched; 25s starts from zero.
			{at: 25 * sec, hits: 2, want: allow(1, 5*sec)},
			{at: 26 * sec, hits: 2, want: deny(1, 4*sec, 4*sec)},
			{at: 26*sec + 1*us, hits: 1, want: allow(0, 4*sec-us)},
			{at: 30*sec + 1*us, hits: 0, want: allow(3, 10*sec-us)},
		},
	}, {
		// One window per minute; hits larger than 1 at once.
		name:  "100_per_minute",
		limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Period: time.Minute},
		steps: []step{
			{at: 59 * sec, hits: 60, want: allow(40, 1*sec)},
			{at: 59*sec + 999*ms, hits: 41, want: deny(40, 1*ms, 1*ms)},
			{at: 59*sec + 999*ms, hits: 40, want: allow(0, 1*ms)},
			{at: 60 * sec, hits: 100, want: allow(0, 60*sec)},
			{at: 60 * sec, hits: 101, want: deny(0, 60*sec, never)},
			{at: 3*time.Minute + 30*sec, hits: 1, want: allow(99, 30*sec)},
		},
	}}
}
