package algorithms

// tokenBucket refills continuously (or in RefillInterval steps that add what
// continuous refill would have, so fractions carry over) and may lend up to
// MaxDebt. Usage past the limit takes it to -(Capacity()+MaxDebt) at most,
// bounding the wait it causes. State, TTL and answers: docs/algorithms.md#token_bucket.
func tokenBucket(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	if lim.Requests == 0 {
		return zeroRate(st, hits)
	}
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	capacity, debt := int64(lim.Capacity()), int64(lim.MaxDebt)
	step := max(lim.RefillInterval.Microseconds(), 1)
	tokens, frac, anchor := tokenBucketAt(lim, st, now)
	// at is when the bucket holds x > tokens tokens.
	at := func(x int64) int64 {
		return ceilTo(anchor+refillTime(x-tokens, frac, p, r), step)
	}
	if hits > uint64(capacity+debt) {
		d := Decision{Remaining: uint64(max(tokens, 0)), RetryAfter: Never}
		if tokens < capacity {
			d.ResetAfter = micros(at(capacity) - now)
		}
		return d, st
	}
	need := max(int64(hits)-debt, 0)
	if tokens < need {
		return Decision{
			Remaining:  uint64(max(tokens, 0)),
			ResetAfter: micros(at(capacity) - now),
			RetryAfter: micros(at(need) - now),
		}, st
	}
	tokens -= int64(hits)
	next := Bucket{Last: anchor, Tokens: tokens, Frac: frac}.state(now)
	if tokens < capacity {
		next.ExpiresAt = at(capacity)
	}
	return Decision{
		Allowed:    true,
		Remaining:  uint64(max(tokens, 0)),
		ResetAfter: micros(next.ExpiresAt - now),
	}, next
}

// tokenBucketAt is the bucket st holds at now (the exact count is
// tokens + frac/Period), refilled up to anchor. lim.Requests > 0.
func tokenBucketAt(lim Limit, st State, now int64) (tokens, frac, anchor int64) {
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	capacity, debt := int64(lim.Capacity()), int64(lim.MaxDebt)
	step := max(lim.RefillInterval.Microseconds(), 1)
	boundary := now - now%step
	if st.ExpiresAt == 0 {
		return capacity, 0, boundary
	}
	b := st.bucket()
	tokens, frac, anchor = clamp(b.Tokens, -(capacity+debt), capacity), clamp(b.Frac, 0, p-1), max(b.Last, boundary)
	if tokens == capacity {
		return tokens, 0, anchor
	}
	if elapsed := boundary - b.Last; elapsed > 0 {
		if elapsed >= refillTime(capacity-tokens, frac, p, r) {
			return capacity, 0, anchor
		}
		var add int64
		add, frac = mad(elapsed, r, frac, p)
		tokens += add
	}
	return tokens, frac, anchor
}

// tokenBucketForce takes hits past the limit, down to the floor of
// -(Capacity()+MaxDebt).
func tokenBucketForce(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 {
		return st, 0
	}
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	capacity, debt := int64(lim.Capacity()), int64(lim.MaxDebt)
	step := max(lim.RefillInterval.Microseconds(), 1)
	tokens, frac, anchor := tokenBucketAt(lim, st, now)
	next := min(max(tokens-int64(min(hits, MaxCount)), -(capacity+debt)), tokens)
	return Bucket{Last: anchor, Tokens: next, Frac: frac}.state(ceilTo(anchor+refillTime(capacity-next, frac, p, r), step)), uint64(tokens - next)
}

// tokenBucketHorizon is the time to refill from the floor usage may reach.
func tokenBucketHorizon(l Limit) int64 {
	step := max(l.RefillInterval.Microseconds(), 1)
	return ceilTo(refillTime(int64(2*l.Capacity()+l.MaxDebt), 0, l.Period.Microseconds(), int64(l.Requests)), step) + step
}

func tokenBucketValid(_ Limit, st State, now, h int64) bool {
	b := st.bucket()
	return between(b.Tokens, -MaxCount, MaxCount) && between(b.Frac, 0, maxPeriodMicros) && b.Last <= now+h
}

// tokenBucketUndo returns min(hits, what the charged bucket would still
// lack at now had nothing else happened): a deficit refill repays in order,
// so that part of the charge is the most the key can owe back.
func tokenBucketUndo(lim Limit, st State, ch Charge, now int64) State {
	p, capacity := lim.Period.Microseconds(), int64(lim.Capacity())
	tokens, frac, anchor := tokenBucketAt(lim, st, now)
	projected, pfrac, _ := tokenBucketAt(lim, ch.After, now)
	// lack = capacity - (projected + pfrac/p), as whole + fraction/p.
	lack, lackFrac := capacity-projected, int64(0)
	if pfrac > 0 {
		lack, lackFrac = lack-1, p-pfrac
	}
	if h := int64(ch.Applied); h < lack || (h == lack && lackFrac > 0) {
		lack, lackFrac = h, 0
	}
	tokens, frac = tokens+lack, frac+lackFrac
	if frac >= p {
		tokens, frac = tokens+1, frac-p
	}
	if tokens >= capacity {
		tokens, frac = capacity, 0
	}
	return Bucket{Last: anchor, Tokens: tokens, Frac: frac}.state(st.ExpiresAt)
}

// tokenBucketRefund puts hits back in the bucket, up to its capacity (a
// bucket in debt repays it first).
func tokenBucketRefund(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 || st.ExpiresAt == 0 {
		return st, 0 // no state at a zero rate; a fresh bucket is full
	}
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	step := max(lim.RefillInterval.Microseconds(), 1)
	tokens, frac, anchor := tokenBucketAt(lim, st, now)
	if tokens >= capacity {
		return st, 0
	}
	// tokens >= -(capacity+debt) and hits <= MaxCount: no overflow.
	if tokens+int64(hits) >= capacity {
		return Bucket{Last: anchor, Tokens: capacity}.state(now), uint64(capacity - tokens) // full: as fresh
	}
	tokens += int64(hits)
	return Bucket{Last: anchor, Tokens: tokens, Frac: frac}.state(ceilTo(anchor+refillTime(capacity-tokens, frac, p, r), step)), hits
}

// tokenBucketCanonical is the bucket refilled to now, fresh when full.
func tokenBucketCanonical(lim Limit, st State, now int64) State {
	if lim.Requests == 0 {
		return State{}
	}
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	tokens, frac, anchor := tokenBucketAt(lim, st, now)
	if tokens >= capacity {
		return State{}
	}
	step := max(lim.RefillInterval.Microseconds(), 1)
	return Bucket{Last: anchor, Tokens: tokens, Frac: frac}.state(ceilTo(anchor+refillTime(capacity-tokens, frac, p, r), step))
}
