package algorithms

import (
	"strconv"
	"testing"
	"time"
)

// t0 is aligned to every period the step tables use (1.7e9 s is a multiple
// of 250 ms and 1 s), so window edges fall on round offsets.
var t0 = time.UnixMicro(1_700_000_000_000_000)

// step is one request at t0+at. lim, when set, replaces the sequence's limit
// from this step on (a config reload).
type step struct {
	at   time.Duration
	hits uint64
	want Decision
	lim  *Limit
}

func ok(remaining uint64, reset time.Duration) Decision {
	return Decision{Allowed: true, Remaining: remaining, ResetAfter: reset}
}

func no(remaining uint64, reset, retry time.Duration) Decision {
	return Decision{Remaining: remaining, ResetAfter: reset, RetryAfter: retry}
}

// recorded is a denial recorded past the limit: nothing left after it,
// before left before its hits.
func recorded(before uint64, reset, retry time.Duration) Decision {
	return Decision{RemainingBefore: before, ResetAfter: reset, RetryAfter: retry}
}

const (
	us = time.Microsecond
	ms = time.Millisecond
	s  = time.Second
)

// runSteps feeds the steps to TakeAll, one single-op batch each, on one key
// (so a state is written exactly when TakeAll says so), and checks each
// decision. It returns the final stored state.
func runSteps(t *testing.T, lim Limit, steps []step) State {
	t.Helper()
	var st State
	load := func(string) State { return st }
	for i, sp := range steps {
		if sp.lim != nil {
			lim = *sp.lim
		}
		b := TakeAll([]Op{{Key: "k", Limit: lim, Hits: sp.hits}}, load, t0.Add(sp.at))
		if got := b.Decisions; got[0] != sp.want {
			t.Fatalf("step %d (t0+%s, %d hits): got %s, want %s", i, sp.at, sp.hits, fmtD(got[0]), fmtD(sp.want))
		}
		if w, written := b.Writes["k"]; written {
			st = w
		}
	}
	return st
}

func fmtD(d Decision) string {
	retry := d.RetryAfter.String()
	if d.RetryAfter == Never {
		retry = "never"
	}
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	return verdict + " remaining=" + strconv.FormatUint(d.Remaining, 10) + " reset=" + d.ResetAfter.String() + " retry=" + retry
}

// The limits of stepTables.
var (
	stepsFW   = Limit{Algorithm: FixedWindow, Requests: 3, Period: s}
	stepsSW   = Limit{Algorithm: SlidingWindow, Requests: 10, Period: s}
	stepsSL   = Limit{Algorithm: SlidingLog, Requests: 3, Period: s}
	stepsTB   = Limit{Algorithm: TokenBucket, Requests: 10, Period: s, Burst: 5}
	stepsLB   = Limit{Algorithm: LeakyBucket, Requests: 10, Period: s, Burst: 5}
	stepsGCRA = Limit{Algorithm: GCRA, Requests: 10, Period: s, Burst: 5}
)

// lowered is l changed by f, for a step that lowers a rule.
func lowered(l Limit, f func(*Limit)) *Limit { f(&l); return &l }

// stepTables are TestSteps' runs: a limit and the steps taken under it.
var stepTables = map[string]struct {
	lim   Limit
	steps []step
}{
	"fixed_window": {stepsFW, []step{
		{at: 0, hits: 1, want: ok(2, s)},
		{at: 100 * ms, hits: 2, want: ok(0, 900*ms)},
		{at: 200 * ms, hits: 1, want: no(0, 800*ms, 800*ms)},
		{at: 300 * ms, hits: 0, want: ok(0, 700*ms)},
		{at: 400 * ms, hits: 4, want: no(0, 600*ms, Never)},
		{at: s - us, hits: 1, want: no(0, us, us)},
		{at: s, hits: 3, want: ok(0, s)},
		{at: 1500 * ms, hits: 0, want: ok(0, 500*ms)},
	}},
	"fixed_window lowered below the count": {stepsFW, []step{
		{at: 0, hits: 3, want: ok(0, s)},
		{at: 0, hits: 0, lim: lowered(stepsFW, func(l *Limit) { l.Requests = 2 }), want: no(0, s, s)},
		{at: s, hits: 2, want: ok(0, s)},
	}},
	"fixed_window zero requests": {Limit{Algorithm: FixedWindow, Period: s}, []step{
		{at: 0, hits: 1, want: no(0, s, Never)},
		{at: 0, hits: 0, want: ok(0, s)},
	}},
	"sliding_window": {stepsSW, []step{
		{at: 0, hits: 10, want: ok(0, 2*s)},
		// prev 0, cur 10: room in the next window once 10*(2s-t)/1s <= 9.
		{at: 500 * ms, hits: 1, want: no(0, 1500*ms, 600*ms)},
		{at: 1100*ms - us, hits: 1, want: no(0, 900*ms+us, us)},
		{at: 1100 * ms, hits: 1, want: ok(0, 1900*ms)},
		{at: 1500 * ms, hits: 0, want: ok(4, 1500*ms)},
		// prev 10 weighs 5 at 1.5s; 5 hits fit when it weighs 4.
		{at: 1500 * ms, hits: 5, want: no(4, 1500*ms, 100*ms)},
		{at: 1600 * ms, hits: 5, want: ok(0, 1400*ms)},
		{at: 3500 * ms, hits: 10, want: ok(0, 1500*ms)},
		{at: 3500 * ms, hits: 11, want: no(0, 1500*ms, Never)},
	}},
	"sliding_window no edge burst": {stepsSW, []step{
		{at: s - us, hits: 10, want: ok(0, s+us)},
		{at: s, hits: 1, want: no(0, s, 100*ms)},
	}},
	"sliding_log": {stepsSL, []step{
		{at: 0, hits: 2, want: ok(1, s)},
		{at: 0, hits: 1, want: ok(0, s)},
		{at: 400 * ms, hits: 1, want: no(0, 600*ms, 600*ms)},
		{at: 999999 * us, hits: 0, want: ok(0, us)},
		{at: s, hits: 3, want: ok(0, s)},
		{at: 1500 * ms, hits: 4, want: no(0, 500*ms, Never)},
		{at: 1700 * ms, hits: 1, want: no(0, 300*ms, 300*ms)},
	}},
	"sliding_log oldest first": {stepsSL, []step{
		{at: 0, hits: 1, want: ok(2, s)},
		{at: 100 * ms, hits: 1, want: ok(1, s)},
		{at: 200 * ms, hits: 1, want: ok(0, s)},
		// Two hits need the entries at 0 and 100ms gone.
		{at: 500 * ms, hits: 2, want: no(0, 700*ms, 600*ms)},
		{at: 1100 * ms, hits: 2, want: ok(0, s)},
	}},
	"token_bucket": {stepsTB, []step{
		{at: 0, hits: 5, want: ok(0, 500*ms)},
		{at: 50 * ms, hits: 1, want: no(0, 450*ms, 50*ms)},
		{at: 100 * ms, hits: 1, want: ok(0, 500*ms)},
		{at: 1 * s, hits: 0, want: ok(5, 0)},
		{at: 1 * s, hits: 6, want: no(5, 0, Never)},
	}},
	"token_bucket debt": {Limit{Algorithm: TokenBucket, Requests: 10, Period: s, Burst: 5, MaxDebt: 3}, []step{
		{at: 0, hits: 8, want: ok(0, 800*ms)},
		{at: 100 * ms, hits: 0, want: no(0, 700*ms, 200*ms)},
		{at: 300 * ms, hits: 1, want: ok(0, 600*ms)},
		{at: 300 * ms, hits: 9, want: no(0, 600*ms, Never)},
		{at: 900 * ms, hits: 8, want: ok(0, 800*ms)},
	}},
	"token_bucket steps": {Limit{Algorithm: TokenBucket, Requests: 10, Period: s, RefillInterval: 250 * ms}, []step{
		{at: 0, hits: 10, want: ok(0, s)},
		{at: 200 * ms, hits: 1, want: no(0, 800*ms, 50*ms)},
		// 2.5 tokens per step: 2 at 250ms, 5 at 500ms.
		{at: 250 * ms, hits: 3, want: no(2, 750*ms, 250*ms)},
		{at: 500 * ms, hits: 3, want: ok(2, s)},
	}},
	"token_bucket lowered burst": {stepsTB, []step{
		{at: 0, hits: 1, want: ok(4, 100*ms)},
		{at: 0, hits: 0, lim: lowered(stepsTB, func(l *Limit) { l.Burst = 2 }), want: ok(2, 0)},
	}},
	"leaky_bucket": {stepsLB, []step{
		{at: 0, hits: 5, want: ok(0, 500*ms)},
		{at: 50 * ms, hits: 1, want: no(0, 450*ms, 50*ms)},
		{at: 100 * ms, hits: 1, want: ok(0, 500*ms)},
		{at: 2 * s, hits: 0, want: ok(5, 0)},
		{at: 2 * s, hits: 6, want: no(5, 0, Never)},
	}},
	"gcra": {stepsGCRA, []step{
		{at: 0, hits: 5, want: ok(0, 500*ms)},
		{at: 50 * ms, hits: 1, want: no(0, 450*ms, 50*ms)},
		{at: 100 * ms, hits: 1, want: ok(0, 500*ms)},
		{at: 1 * s, hits: 0, want: ok(5, 0)},
		{at: 1 * s, hits: 6, want: no(5, 0, Never)},
	}},
	"gcra fractional interval": {Limit{Algorithm: GCRA, Requests: 3, Period: s}, []step{
		{at: 0, hits: 1, want: ok(2, 333334*us)},
		{at: 0, hits: 2, want: ok(0, s)},
		{at: 1 * us, hits: 1, want: no(0, s-us, 333333*us)},
		{at: 333334 * us, hits: 1, want: ok(0, s)},
	}},
	"zero requests": {Limit{Algorithm: GCRA, Period: s, Burst: 5}, []step{
		{at: 0, hits: 1, want: no(0, 0, Never)},
		{at: 0, hits: 0, want: ok(0, 0)},
	}},
	"invalid limit": {Limit{Algorithm: TokenBucket, Requests: 1}, []step{
		{at: 0, hits: 0, want: no(0, 0, Never)},
	}},
}

func TestSteps(t *testing.T) {
	for name, tc := range stepTables {
		t.Run(name, func(t *testing.T) { runSteps(t, tc.lim, tc.steps) })
	}
}
