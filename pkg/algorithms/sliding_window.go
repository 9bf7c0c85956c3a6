package algorithms

// slidingWindow approximates a sliding window in O(1) state, like
// Cloudflare's: windows of Period aligned to the Unix epoch, and at a time
// el µs into the current window the count is
//
//	cur + ceil(prev * (Period - el) / Period)
//
// (the previous window's hits weighted by how much of it still overlaps the
// sliding window, rounded up so it never admits more than a true sliding
// window that spread prev evenly). A burst at the end of one window is still
// counted at the start of the next, so there is no 2x burst at the edges.
// The arithmetic is exact integers (mulAddDivMod), not binary64 weights.
//
// State (Window): Start (µs) of the current window, Count = hits admitted
// in it, Prev = hits admitted in the window before it.
// TTL: the end of the window after start (when count stops counting as
// prev).
// Remaining: Requests minus the weighted count.
// ResetAfter: until the weighted count reaches 0 (the end of the next window
// while the current one has hits). RetryAfter: the exact first µs at which
// the weighted count leaves room for hits.
//
// A state from another alignment (the Period changed) reads as fresh.
func slidingWindow(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	if lim.Requests == 0 {
		return zeroRate(st, hits)
	}
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	start, cur, prev := slidingWindowAt(lim, st, now)
	elapsed := max(now-start, 0)
	weighted, _ := mad(prev, p-elapsed, p-1, p)
	room := r - cur - weighted
	reset := int64(0)
	switch {
	case cur > 0:
		reset = start + 2*p - now
	case prev > 0:
		reset = start + p - now
	}
	if hits > uint64(r) {
		return Decision{Remaining: uint64(max(room, 0)), ResetAfter: micros(reset), RetryAfter: Never}, st
	}
	if room < 0 || hits > uint64(room) {
		var at int64
		if left := r - cur - int64(hits); left >= 0 {
			// Later in this window: prev*(start+p-at) <= left*p.
			q, _ := mad(left, p, 0, prev)
			at = start + p - q
		} else {
			// In the next window, where cur becomes the previous count.
			q, _ := mad(r-int64(hits), p, 0, cur)
			at = start + 2*p - q
		}
		return Decision{Remaining: uint64(max(room, 0)), ResetAfter: micros(reset), RetryAfter: micros(at - now)}, st
	}
	cur += int64(hits)
	next := Window{Start: start, Count: cur, Prev: prev}.State(now)
	switch {
	case cur > 0:
		next.ExpiresAt = start + 2*p
	case prev > 0:
		next.ExpiresAt = start + p
	}
	return Decision{
		Allowed:    true,
		Remaining:  uint64(room - int64(hits)),
		ResetAfter: micros(next.ExpiresAt - now),
	}, next
}

// slidingWindowAt is the window st holds at now: its start, its count and
// the previous window's.
func slidingWindowAt(lim Limit, st State, now int64) (start, cur, prev int64) {
	p := lim.Period.Microseconds()
	start = now - now%p
	if w := st.Window(); st.ExpiresAt != 0 {
		switch {
		case w.Start == start:
			cur, prev = w.Count, w.Prev
		case w.Start == start-p:
			prev = w.Count
		case w.Start > start && (w.Start-start)%p == 0:
			// The clock went back a window or more: keep the newer counts.
			start, cur, prev = w.Start, w.Count, w.Prev
		}
		cur, prev = max(cur, 0), max(prev, 0)
	}
	return start, cur, prev
}

// slidingWindowForce counts hits past the limit in the current window (up
// to MaxCount): they weigh on the next window too, as admitted hits do.
func slidingWindowForce(lim Limit, st State, hits uint64, now int64) State {
	start, cur, prev := slidingWindowAt(lim, st, now)
	cur = min(cur+int64(hits), MaxCount)
	return Window{Start: start, Count: cur, Prev: prev}.State(start + 2*lim.Period.Microseconds())
}

func slidingWindowHorizon(l Limit) int64 { return 2 * l.Period.Microseconds() }

// A window start one period ahead is a clock that went back a window.
func slidingWindowValid(lim Limit, st State, now, _ int64) bool {
	w := st.Window()
	return between(w.Count, 0, MaxCount) && between(w.Prev, 0, MaxCount) && w.Start <= now+lim.Period.Microseconds()
}

func slidingWindowUndo(lim Limit, st State, ch Charged, _ int64) State {
	w, charged := st.Window(), ch.After.Window().Start
	switch h := int64(ch.Hits); w.Start {
	case charged:
		w.Count = max(w.Count-h, 0)
	case charged + lim.Period.Microseconds():
		w.Prev = max(w.Prev-h, 0)
	}
	return w.State(st.ExpiresAt)
}
