package algorithms

import (
	"slices"
	"time"
)

// Charged is what one all-or-nothing batch charged one key: the hits its
// allowed ops took there in total, and the state it wrote (for sliding_log,
// After.Log holds only the entries the batch added).
type Charged struct {
	Hits  uint64
	After State
}

// Undo takes back a charge from st, the key's state at now, for a batch
// that was charged and must now be denied (Redis Cluster decides a request's
// slot groups separately). It never leaves more room than the key would have
// had if the charge had never happened, whatever was admitted and however
// much time passed in between, and exactly that room while nothing else
// touched the key:
//
//   - fixed_window: the hits leave the count only while the window that
//     counted them is current;
//   - sliding_window: they leave the window they were counted in, current or
//     previous;
//   - token_bucket, leaky_bucket, gcra: only the part of the charge that
//     refill (drain, the clock) has not already paid back is returned: a
//     bucket that filled up since forgets the charge; what is returned is
//     clamped to the bucket's bounds;
//   - sliding_log: the entries the batch added are removed (a later entry
//     at the same µs still gets a fresh Seq: slidingLog numbers after the
//     highest one there).
//
// An expired state, a state of the other family, a zero charge or an
// invalid limit is returned unchanged. Undo keeps ExpiresAt (but for
// sliding_log, whose newest entry may have gone): the state only ever
// matters for less time than it says.
func Undo(lim Limit, st State, ch Charged, now time.Time) State {
	us := min(max(now.UnixMicro(), 0), MaxUnixMicro)
	alg, ok := lim.Algorithm.lookup()
	if !ok || lim.Validate() != nil || ch.Hits == 0 || lim.Requests == 0 ||
		st.ExpiresAt == 0 || us >= st.ExpiresAt || (alg.family == Log) != (len(st.Log) > 0) {
		return st
	}
	return alg.undo(lim, st, ch, us)
}

func fixedWindowUndo(_ Limit, st State, ch Charged, _ int64) State {
	if st.A == ch.After.A {
		st.B = max(st.B-int64(ch.Hits), 0)
	}
	return st
}

func slidingWindowUndo(lim Limit, st State, ch Charged, _ int64) State {
	switch h := int64(ch.Hits); st.A {
	case ch.After.A:
		st.B = max(st.B-h, 0)
	case ch.After.A + lim.Period.Microseconds():
		st.C = max(st.C-h, 0)
	}
	return st
}

func slidingLogUndo(lim Limit, st State, ch Charged, _ int64) State {
	log := slices.DeleteFunc(slices.Clone(st.Log), func(e LogEntry) bool {
		return slices.Contains(ch.After.Log, e)
	})
	if len(log) == 0 {
		return State{ExpiresAt: 1} // as slidingLog leaves an empty log
	}
	return State{Log: log, ExpiresAt: log[len(log)-1].At + lim.Period.Microseconds()}
}

// tokenBucketUndo returns min(hits, what the charged bucket would still
// lack at now had nothing else happened): a deficit refill repays in order,
// so that part of the charge is the most the key can owe back.
func tokenBucketUndo(lim Limit, st State, ch Charged, now int64) State {
	p, capacity := lim.Period.Microseconds(), int64(lim.Capacity())
	tokens, frac, anchor := tokenBucketAt(lim, st, now)
	projected, pfrac, _ := tokenBucketAt(lim, ch.After, now)
	// lack = capacity - (projected + pfrac/p), as whole + fraction/p.
	lack, lackFrac := capacity-projected, int64(0)
	if pfrac > 0 {
		lack, lackFrac = lack-1, p-pfrac
	}
	if h := int64(ch.Hits); h < lack || (h == lack && lackFrac > 0) {
		lack, lackFrac = h, 0
	}
	tokens, frac = tokens+lack, frac+lackFrac
	if frac >= p {
		tokens, frac = tokens+1, frac-p
	}
	if tokens >= capacity {
		tokens, frac = capacity, 0
	}
	return State{A: anchor, B: tokens, C: frac, ExpiresAt: st.ExpiresAt}
}

// leakyBucketUndo drains min(hits, the charged meter's level at now had
// nothing else happened) from the level: draining paid back the rest.
func leakyBucketUndo(lim Limit, st State, ch Charged, now int64) State {
	p := lim.Period.Microseconds()
	level, frac, anchor := leakyBucketAt(lim, st, now)
	projected, pfrac, _ := leakyBucketAt(lim, ch.After, now)
	if h := int64(ch.Hits); h < projected {
		level -= h
	} else {
		// level - frac/p - (projected - pfrac/p)
		level, frac = level-projected, frac-pfrac
		if frac < 0 {
			level, frac = level+1, frac+p
		}
	}
	if level <= 0 {
		level, frac = 0, 0
	}
	return State{A: anchor, B: level, C: frac, ExpiresAt: st.ExpiresAt}
}

// gcraUndo moves the TAT back by min(hits*T, how far the charged TAT was
// still ahead of now): a TAT the clock overtook forgot the charge, and
// another request after that started from the clock, not from the charge.
func gcraUndo(lim Limit, st State, ch Charged, now int64) State {
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	back, backFrac := mad(int64(ch.Hits), p, 0, r)
	ahead, aheadFrac := ch.After.A-now, clamp(ch.After.B, 0, r-1)
	if ahead < 0 {
		ahead, aheadFrac = 0, 0
	}
	if ahead < back || (ahead == back && aheadFrac < backFrac) {
		back, backFrac = ahead, aheadFrac
	}
	tat, frac := st.A-back, clamp(st.B, 0, r-1)-backFrac
	if frac < 0 {
		tat, frac = tat-1, frac+r
	}
	if tat < now {
		tat, frac = now, 0
	}
	return State{A: tat, B: frac, ExpiresAt: st.ExpiresAt}
}
