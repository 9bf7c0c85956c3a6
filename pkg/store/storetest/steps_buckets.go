package storetest

import (
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// The bucket tables follow the doc comments of tokenBucket, leakyBucket and
// gcra in pkg/algorithms; each comment line works out one step.

func tokenBucketSteps() []stepTable {
	never := algorithms.Never
	return []stepTable{{
		// 1 token/s continuous, 5 tokens, starts full.
		name:  "continuous_1_per_s_burst_5",
		limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: 10 * sec, Burst: 5},
		steps: []step{
			{at: 0, hits: 3, want: allow(2, 3*sec)},                        // 5-3=2; 3 tokens to refill
			{at: 500 * ms, hits: 3, want: deny(2, 2500*ms, 500*ms)},        // 2.5 tokens: 3rd at 1s, full at 3s
			{at: 1 * sec, hits: 3, want: allow(0, 5*sec)},                  // exactly 3 tokens
			{at: 1 * sec, hits: 0, want: allow(0, 5*sec)},                  // a check on an empty bucket is allowed
			{at: 1 * sec, hits: 6, want: deny(0, 5*sec, never)},            // more than the bucket holds
			{at: 3*sec + 250*ms, hits: 2, want: allow(0, 4750*ms)},         // 2.25 tokens; 0.25 left carries over
			{at: 4 * sec, hits: 1, want: allow(0, 5*sec)},                  // 0.25+0.75 = 1 token
			{at: 20 * sec, hits: 0, want: allow(5, 0)},                     // long expired: full, nothing to reset
			{at: 20 * sec, hits: 5, want: allow(0, 5*sec)},                 // the whole burst at once
			{at: 22*sec + 999999*us, hits: 3, want: deny(2, 2*sec+us, us)}, // 2.999999 tokens
		},
	}, {
		// 2 tokens land every 2 s on epoch multiples of 2 s; 10 tokens.
		name:  "refill_interval_2s",
		limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: 10 * sec, RefillInterval: 2 * sec},
		steps: []step{
			{at: 500 * ms, hits: 10, want: allow(0, 9500*ms)},        // full again at the 10s step
			{at: 1900 * ms, hits: 1, want: deny(0, 8100*ms, 100*ms)}, // nothing arrives before 2s
			{at: 2 * sec, hits: 1, want: allow(1, 10*sec)},           // 2 arrived; 9 short, full at the 12s step
			{at: 4*sec - us, hits: 2, want: deny(1, 8*sec+us, us)},   // still 1 until the 4s step
			{at: 4 * sec, hits: 2, want: allow(1, 10*sec)},           // 1+2-2; full at the 14s step
		},
	}, {
		// 1 token/s, 2 tokens, and up to 3 more on credit.
		name:  "max_debt_3",
		limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1, Period: sec, Burst: 2, MaxDebt: 3},
		steps: []step{
			{at: 0, hits: 4, want: allow(0, 4*sec)},                  // 2 tokens, 2 borrowed: -2
			{at: 0, hits: 0, want: deny(0, 4*sec, 2*sec)},            // in debt even a check is denied
			{at: 1500 * ms, hits: 1, want: deny(0, 2500*ms, 500*ms)}, // -0.5: still in debt
			{at: 2 * sec, hits: 5, want: deny(0, 2*sec, 2*sec)},      // 0 tokens; 5 needs 5-3=2 in hand
			{at: 2 * sec, hits: 3, want: allow(0, 5*sec)},            // borrows all 3: -3
			{at: 2 * sec, hits: 6, want: deny(0, 5*sec, never)},      // over burst+max_debt
			{at: 7 * sec, hits: 2, want: allow(0, 2*sec)},            // repaid and full at 7s
		},
	}}
}

func leakyBucketSteps() []stepTable {
	never := algorithms.Never
	return []stepTable{{
		// Drains 2/s (one unit per 500 ms), holds 4.
		name:  "drain_2_per_s_burst_4",
		limit: algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 2, Period: sec, Burst: 4},
		steps: []step{
			{at: 0, hits: 3, want: allow(1, 1500*ms)},               // level 3, empty after 1.5s
			{at: 250 * ms, hits: 2, want: deny(1, 1250*ms, 250*ms)}, // level 2.5, must reach 2
			{at: 500 * ms, hits: 2, want: allow(0, 2*sec)},          // level 2 -> 4
			{at: 500 * ms, hits: 5, want: deny(0, 2*sec, never)},    // more than the meter holds
			{at: 500 * ms, hits: 0, want: allow(0, 2*sec)},          // a full meter still passes a check
			{at: 1750 * ms, hits: 1, want: allow(1, 1250*ms)},       // 4 - 2.5 drained = 1.5 -> 2.5
			{at: 3 * sec, hits: 0, want: allow(4, 0)},               // empty
		},
	}}
}

func gcraSteps() []stepTable {
	never := algorithms.Never
	return []stepTable{{
		// T = 200 ms, 3 hits of burst: the TAT may lead the clock by 600 ms.
		name:  "5_per_s_burst_3",
		limit: algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 5, Period: sec, Burst: 3},
		steps: []step{
			{at: 0, hits: 1, want: allow(2, 200*ms)},               // TAT 200ms
			{at: 0, hits: 2, want: allow(0, 600*ms)},               // TAT 600ms, exactly the limit
			{at: 100 * ms, hits: 1, want: deny(0, 500*ms, 100*ms)}, // 700ms ahead would exceed 600
			{at: 100 * ms, hits: 4, want: deny(0, 500*ms, never)},  // beyond the burst
			{at: 250 * ms, hits: 0, want: allow(1, 350*ms)},        // lead 350ms = 1.75 T
			{at: 250 * ms, hits: 1, want: allow(0, 550*ms)},        // TAT 800ms
			{at: 1 * sec, hits: 3, want: allow(0, 600*ms)},         // TAT passed: fresh
		},
	}, {
		// T = 333333.33 µs: the TAT keeps its fraction of a µs.
		name:  "3_per_s_fractional_T",
		limit: algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 3, Period: sec},
		steps: []step{
			{at: 0, hits: 1, want: allow(2, 333334*us)},                  // TAT 333333.33
			{at: 0, hits: 2, want: allow(0, sec)},                        // TAT exactly 1s
			{at: 500 * ms, hits: 1, want: allow(0, 833334*us)},           // TAT 1333333.33, lead 2.5 T
			{at: 500 * ms, hits: 1, want: deny(0, 833334*us, 166667*us)}, // fits once the lead is <= 2 T
			{at: 666667 * us, hits: 1, want: allow(0, 1*sec)},            // TAT 1666666.67 (ceil to the µs)
		},
	}}
}
