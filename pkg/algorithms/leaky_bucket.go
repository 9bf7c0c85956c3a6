package algorithms

// leakyBucket is a meter draining at Requests per Period; Frac keeps the
// drained fraction so that nothing rounds in anyone's favour. Usage past the
// limit fills it to twice Capacity(), bounding the wait it causes.
// State, TTL and answers: docs/algorithms.md#leaky_bucket.
func leakyBucket(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	if lim.Requests == 0 {
		return zeroRate(st, hits)
	}
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	level, frac, anchor := leakyBucketAt(lim, st, now)
	// at is when the level has drained down to x < level.
	at := func(x int64) int64 {
		return anchor + refillTime(level-x, frac, p, r)
	}
	if hits > uint64(capacity) {
		d := Decision{Remaining: uint64(max(capacity-level, 0)), RetryAfter: Never}
		if level > 0 {
			d.ResetAfter = micros(at(0) - now)
		}
		return d, st
	}
	if target := capacity - int64(hits); level > target {
		return Decision{
			Remaining:  uint64(max(capacity-level, 0)),
			ResetAfter: micros(at(0) - now),
			RetryAfter: micros(at(target) - now),
		}, st
	}
	level += int64(hits)
	next := Meter{Last: anchor, Level: level, Frac: frac}.state(now)
	if level > 0 {
		next.ExpiresAt = at(0)
	}
	return Decision{
		Allowed:    true,
		Remaining:  uint64(capacity - level),
		ResetAfter: micros(next.ExpiresAt - now),
	}, next
}

// leakyBucketAt is the meter st holds at now (the exact level is
// level - frac/Period), drained up to anchor. lim.Requests > 0.
func leakyBucketAt(lim Limit, st State, now int64) (level, frac, anchor int64) {
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	if st.ExpiresAt == 0 {
		return 0, 0, now
	}
	m := st.meter()
	level, frac, anchor = clamp(m.Level, 0, 2*capacity), clamp(m.Frac, 0, p-1), max(m.Last, now)
	if level == 0 {
		return 0, 0, anchor
	}
	if elapsed := now - m.Last; elapsed > 0 {
		if elapsed >= refillTime(level, frac, p, r) {
			return 0, 0, anchor
		}
		var drained int64
		drained, frac = mad(elapsed, r, frac, p)
		level -= drained
	}
	return level, frac, anchor
}

// leakyBucketForce adds hits past the limit, up to twice Capacity().
func leakyBucketForce(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 {
		return st, 0
	}
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	level, frac, anchor := leakyBucketAt(lim, st, now)
	next := max(min(level+int64(min(hits, MaxCount)), 2*capacity), level)
	return Meter{Last: anchor, Level: next, Frac: frac}.state(anchor + refillTime(next, frac, p, r)), uint64(next - level)
}

// leakyBucketHorizon is the time to drain the fullest meter usage leaves.
func leakyBucketHorizon(l Limit) int64 {
	return refillTime(int64(2*l.Capacity()), 0, l.Period.Microseconds(), int64(l.Requests))
}

func leakyBucketValid(_ Limit, st State, now, h int64) bool {
	m := st.meter()
	return between(m.Level, 0, MaxCount) && between(m.Frac, 0, maxPeriodMicros) && m.Last <= now+h
}

// leakyBucketUndo drains min(hits, the charged meter's level at now had
// nothing else happened) from the level: draining paid back the rest.
func leakyBucketUndo(lim Limit, st State, ch Charge, now int64) State {
	p := lim.Period.Microseconds()
	level, frac, anchor := leakyBucketAt(lim, st, now)
	projected, pfrac, _ := leakyBucketAt(lim, ch.After, now)
	if h := int64(ch.Applied); h < projected {
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
	return Meter{Last: anchor, Level: level, Frac: frac}.state(st.ExpiresAt)
}

// leakyBucketRefund drains hits from the meter's level, down to empty.
func leakyBucketRefund(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 || st.ExpiresAt == 0 {
		return st, 0 // no state at a zero rate; a fresh meter is empty
	}
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	level, frac, anchor := leakyBucketAt(lim, st, now)
	if level <= 0 {
		return st, 0
	}
	if int64(hits) >= level {
		return Meter{Last: anchor}.state(now), uint64(level) // empty: as fresh
	}
	level -= int64(hits)
	return Meter{Last: anchor, Level: level, Frac: frac}.state(anchor + refillTime(level, frac, p, r)), hits
}

// leakyBucketCanonical is the meter drained to now, fresh when empty.
func leakyBucketCanonical(lim Limit, st State, now int64) State {
	if lim.Requests == 0 {
		return State{}
	}
	level, frac, anchor := leakyBucketAt(lim, st, now)
	if level <= 0 {
		return State{}
	}
	return Meter{Last: anchor, Level: level, Frac: frac}.state(anchor + refillTime(level, frac, lim.Period.Microseconds(), int64(lim.Requests)))
}
