package algorithms

// gcra keeps one theoretical arrival time per key: it admits exactly what a
// token bucket of Capacity() would, with the smallest state. Frac keeps the
// TAT's sub-µs part, as the emission interval is rarely whole µs; records past
// the limit move it by whole intervals so that an undo is exact.
// State, TTL and answers: docs/algorithms.md#gcra.
func gcra(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	if lim.Requests == 0 {
		return zeroRate(st, hits)
	}
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	// Admitted hits keep the TAT within window = capacity*T = q + rem/r µs
	// of the clock.
	q, rem := mad(capacity, p, 0, r)
	tat, frac := gcraAt(lim, st, now)
	remaining := max(capacity-ceilDiv(tat-now, r, frac, p), 0)
	reset := tat - now
	if frac > 0 {
		reset++
	}
	if hits > uint64(capacity) {
		return Decision{Remaining: uint64(remaining), ResetAfter: micros(reset), RetryAfter: Never}, st
	}
	add, nextFrac := mad(int64(hits), p, frac, r)
	next := tat + add
	if next-now > q || (next-now == q && nextFrac > rem) {
		// Admissible once the TAT is within (capacity-hits)*T of the clock.
		hq, hrem := mad(capacity-int64(hits), p, 0, r)
		at := tat - hq
		if frac > hrem {
			at++
		}
		return Decision{Remaining: uint64(remaining), ResetAfter: micros(reset), RetryAfter: micros(at - now)}, st
	}
	expires := next
	if nextFrac > 0 {
		expires++
	}
	return Decision{
			Allowed:    true,
			Remaining:  uint64(capacity - ceilDiv(next-now, r, nextFrac, p)),
			ResetAfter: micros(expires - now),
		},
		Arrival{TAT: next, Frac: nextFrac}.state(expires)
}

// ceilDiv is ceil((a*b + c) / d).
func ceilDiv(a, b, c, d int64) int64 {
	q, _ := mad(a, b, c+d-1, d)
	return q
}

// gcraAt is the TAT st holds at now (whole µs and fraction in 1/Requests
// units): never behind the clock, never more than 2*Capacity()*T ahead.
// lim.Requests > 0.
func gcraAt(lim Limit, st State, now int64) (tat, frac int64) {
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	tat = now
	if st.ExpiresAt != 0 {
		q2, rem2 := mad(2*capacity, p, 0, r)
		a := st.arrival()
		tat, frac = a.TAT, clamp(a.Frac, 0, r-1)
		if tat > now+q2 || (tat == now+q2 && frac > rem2) {
			tat, frac = now+q2, rem2
		}
	}
	if tat < now {
		tat, frac = now, 0
	}
	return tat, frac
}

// gcraForce moves the TAT by hits*T past the limit, in whole emission
// intervals as far as 2*Capacity()*T ahead of the clock: at most as many
// as the slots then free, 2*Capacity() minus those taken (gcra's
// Remaining before its clamp at 0).
func gcraForce(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 {
		return st, 0
	}
	p, r, capacity := lim.Period.Microseconds(), int64(lim.Requests), int64(lim.Capacity())
	tat, frac := gcraAt(lim, st, now)
	k := min(int64(min(hits, MaxCount)), max(2*capacity-ceilDiv(tat-now, r, frac, p), 0))
	add, frac := mad(k, p, frac, r)
	tat += add
	expires := tat
	if frac > 0 {
		expires++
	}
	return Arrival{TAT: tat, Frac: frac}.state(expires), uint64(k)
}

// gcraHorizon is how far ahead the TAT may run, plus its fraction.
func gcraHorizon(l Limit) int64 {
	q, _ := mad(2*int64(l.Capacity()), l.Period.Microseconds(), 0, int64(l.Requests))
	return q + 1
}

// A TAT up to one horizon beyond the clamp is a lowered rule's (gcra clamps
// it); further ahead it is not from any rule of this size.
func gcraValid(_ Limit, st State, now, h int64) bool {
	a := st.arrival()
	return between(a.Frac, 0, MaxCount) && a.TAT <= now+2*h
}

// gcraUndo moves the TAT back by min(hits*T, how far the charged TAT was
// still ahead of now): a TAT the clock overtook forgot the charge, and
// another request after that started from the clock, not from the charge.
func gcraUndo(lim Limit, st State, ch Charge, now int64) State {
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	back, backFrac := mad(int64(ch.Applied), p, 0, r)
	charged, cur := ch.After.arrival(), st.arrival()
	ahead, aheadFrac := charged.TAT-now, clamp(charged.Frac, 0, r-1)
	if ahead < 0 {
		ahead, aheadFrac = 0, 0
	}
	if ahead < back || (ahead == back && aheadFrac < backFrac) {
		back, backFrac = ahead, aheadFrac
	}
	tat, frac := cur.TAT-back, clamp(cur.Frac, 0, r-1)-backFrac
	if frac < 0 {
		tat, frac = tat-1, frac+r
	}
	if tat < now {
		tat, frac = now, 0
	}
	return Arrival{TAT: tat, Frac: frac}.state(st.ExpiresAt)
}

// gcraRefund moves the TAT back by hits emission intervals, never before
// now (a TAT at now is a fresh key).
func gcraRefund(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 || st.ExpiresAt == 0 {
		return st, 0 // no state at a zero rate; a fresh key is at now
	}
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	tat, frac := gcraAt(lim, st, now)
	if tat == now && frac == 0 {
		return st, 0
	}
	// The slots taken, as Remaining counts them: giving that many back (or
	// more) reaches now; fewer leave the TAT ahead of it.
	taken := ceilDiv(tat-now, r, frac, p)
	if int64(hits) >= taken {
		return Arrival{TAT: now}.state(now), uint64(taken) // as fresh
	}
	back, backFrac := mad(int64(hits), p, 0, r)
	tat, frac = tat-back, frac-backFrac
	if frac < 0 {
		tat, frac = tat-1, frac+r
	}
	expires := tat
	if frac > 0 {
		expires++
	}
	return Arrival{TAT: tat, Frac: frac}.state(expires), hits
}

// gcraCanonical is the TAT at now, fresh at the clock.
func gcraCanonical(lim Limit, st State, now int64) State {
	if lim.Requests == 0 {
		return State{}
	}
	tat, frac := gcraAt(lim, st, now)
	if tat == now && frac == 0 {
		return State{}
	}
	expires := tat
	if frac > 0 {
		expires++
	}
	return Arrival{TAT: tat, Frac: frac}.state(expires)
}
