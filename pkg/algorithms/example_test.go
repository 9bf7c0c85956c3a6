package algorithms_test

import (
	"fmt"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// Take is a pure function: the caller keeps the state and the clock.
func ExampleTake() {
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 2}
	now := time.Unix(1_700_000_000, 0)
	var st algorithms.State
	for i := range 3 {
		d, next := algorithms.Take(lim, st, 1, now)
		if d.Allowed {
			st = next // persist only what an admitted take returns
		}
		fmt.Printf("hit %d: allowed=%v remaining=%d retry_after=%s\n", i+1, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// hit 1: allowed=true remaining=1 retry_after=0s
	// hit 2: allowed=true remaining=0 retry_after=0s
	// hit 3: allowed=false remaining=0 retry_after=100ms
}

// TakeAll decides a request's descriptors as one all-or-nothing batch: the
// per-minute rule is spent, so the per-second one is not charged either,
// and the batch says what each op applied.
func ExampleTakeAll() {
	perSecond := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Second}
	perMinute := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Minute}
	states := map[string]algorithms.State{}
	load := func(key string) algorithms.State { return states[key] }
	now := time.Unix(1_700_000_000, 0)
	for i := range 2 {
		ops := []algorithms.Op{
			{Key: "second", Limit: perSecond, Hits: 1},
			{Key: "minute", Limit: perMinute, Hits: 1},
		}
		b := algorithms.TakeAll(ops, load, now)
		for k, st := range b.Writes {
			states[k] = st
		}
		fmt.Printf("request %d: denied=%v second.remaining=%d applied=%v\n", i+1, b.Denied, b.Decisions[0].Remaining, b.Applied)
	}
	// Output:
	// request 1: denied=false second.remaining=4 applied=[1 1]
	// request 2: denied=true second.remaining=4 applied=[0 0]
}

// Undo takes back a charge exactly while nothing else happened, and never
// gives back what refill has already repaid.
func ExampleUndo() {
	lim := algorithms.Limit{Algorithm: algorithms.GCRA, Requests: 10, Period: time.Second}
	now := time.Unix(1_700_000_000, 0)
	_, charged := algorithms.Take(lim, algorithms.State{}, 4, now)
	ch := algorithms.Charge{Key: "k", Limit: lim, Applied: 4, After: charged}
	for _, later := range []time.Duration{0, 300 * time.Millisecond} {
		undone := algorithms.Undo(charged, ch, now.Add(later))
		d, _ := algorithms.Take(lim, undone, 0, now.Add(later))
		fmt.Printf("undo after %s: remaining=%d\n", later, d.Remaining)
	}
	// Output:
	// undo after 0s: remaining=10
	// undo after 300ms: remaining=10
}

// A state is read through its algorithm's named view: here token_bucket's
// Bucket after two of three tokens were taken.
func ExampleViewOf() {
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Second}
	now := time.Unix(1_700_000_000, 0)
	_, st := algorithms.Take(lim, algorithms.State{}, 2, now)
	b := algorithms.ViewOf[algorithms.Bucket](st)
	fmt.Printf("tokens=%d frac=%d last=%s\n", b.Tokens, b.Frac, time.UnixMicro(b.Last).UTC().Format(time.RFC3339))
	// Output:
	// tokens=1 frac=0 last=2023-11-14T22:13:20Z
}

// A Usage op records usage already consumed, such as an LLM response's
// token count reported when it ends: it is always recorded, past the limit
// too, and later requests wait until the overdraft has passed. The state's
// ExpiresAt is when it no longer matters: the TTL a store keeps it for.
func ExampleOp_usage() {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1000, Period: time.Minute}
	now := time.Unix(1_700_000_040, 0) // a minute starts
	var st algorithms.State
	record := func(tokens uint64, at time.Time) algorithms.Decision {
		b := algorithms.TakeAll([]algorithms.Op{{Key: "k", Limit: lim, Hits: tokens, Usage: true}},
			func(string) algorithms.State { return st }, at)
		st = b.Writes["k"]
		return b.Decisions[0]
	}
	d := record(900, now)
	fmt.Printf("900 tokens: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	d = record(200, now.Add(time.Second))
	fmt.Printf("200 more: allowed=%v remaining=%d retry_after=%s\n", d.Allowed, d.Remaining, d.RetryAfter)
	d, _ = algorithms.Take(lim, st, 0, now.Add(2*time.Second))
	fmt.Printf("check: allowed=%v; keep the state until %s\n", d.Allowed, time.UnixMicro(st.ExpiresAt).UTC().Format(time.TimeOnly))
	// Output:
	// 900 tokens: allowed=true remaining=100
	// 200 more: allowed=false remaining=0 retry_after=59s
	// check: allowed=false; keep the state until 22:15:00
}
