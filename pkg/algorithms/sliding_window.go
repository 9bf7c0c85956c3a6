package algorithms

// slidingWindow is Cloudflare's O(1) approximation: cur + ceil(prev*(Period-el)/Period),
// rounded up so that it never admits more than a true sliding window, in
// exact integers (mulAddDivMod). State, TTL and answers: docs/algorithms.md#sliding_window.
func slidingWindow(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	if lim.Requests == 0 {
		return zeroRate(st, hits)
	}
	r := int64(lim.Requests)
	start, end, cur, prev := slidingWindowAt(lim, st, now)
	p := end - start // this window's length (a calendar month's varies)
	elapsed := max(now-start, 0)
	weighted, _ := mad(prev, p-elapsed, p-1, p)
	room := r - cur - weighted
	if hits > uint64(r) {
		return Decision{Remaining: uint64(max(room, 0)), ResetAfter: micros(slidingWindowExpiry(lim, end, cur, prev, now) - now), RetryAfter: Never}, st
	}
	if room < 0 || hits > uint64(room) {
		var at int64
		if left := r - cur - int64(hits); left >= 0 {
			// Later in this window: prev*(end-at) <= left*p.
			q, _ := mad(left, p, 0, prev)
			at = end - q
		} else {
			// In the next window, where cur becomes the previous count.
			next := windowAfter(lim, end)
			q, _ := mad(r-int64(hits), next-end, 0, cur)
			at = next - q
		}
		return Decision{Remaining: uint64(max(room, 0)), ResetAfter: micros(slidingWindowExpiry(lim, end, cur, prev, now) - now), RetryAfter: micros(at - now)}, st
	}
	cur += int64(hits)
	next := Window{Start: start, Count: cur, Prev: prev}.state(slidingWindowExpiry(lim, end, cur, prev, now))
	return Decision{
		Allowed:    true,
		Remaining:  uint64(room - int64(hits)),
		ResetAfter: micros(next.ExpiresAt - now),
	}, next
}

// slidingWindowExpiry is when counts cur and prev of the window ending at
// end stop weighing: the end of the next window while cur has hits, the
// end of this one while only prev has, now when neither has.
func slidingWindowExpiry(lim Limit, end, cur, prev, now int64) int64 {
	switch {
	case cur > 0:
		return windowAfter(lim, end)
	case prev > 0:
		return end
	}
	return now
}

// slidingWindowAt is the window st holds at now: its start and end, its
// count and the previous window's.
func slidingWindowAt(lim Limit, st State, now int64) (start, end, cur, prev int64) {
	start, end = windowAt(lim, now)
	if w := st.window(); st.ExpiresAt != 0 {
		switch {
		case w.Start == start:
			cur, prev = w.Count, w.Prev
		case w.Start == windowBefore(lim, start):
			prev = w.Count
		case w.Start > start && isWindowStart(lim, w.Start):
			// The clock went back a window or more: keep the newer counts.
			start, end, cur, prev = w.Start, windowAfter(lim, w.Start), w.Count, w.Prev
		}
		cur, prev = max(cur, 0), max(prev, 0)
	}
	return start, end, cur, prev
}

// slidingWindowForce counts hits past the limit in the current window (up
// to MaxCount): they weigh on the next window too, as admitted hits do.
func slidingWindowForce(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	start, end, cur, prev := slidingWindowAt(lim, st, now)
	next := max(min(cur+int64(hits), MaxCount), cur)
	return Window{Start: start, Count: next, Prev: prev}.state(windowAfter(lim, end)), uint64(next - cur)
}

func slidingWindowHorizon(l Limit) int64 { return 2 * longestWindow(l) }

// A window start one window ahead is a clock that went back a window.
func slidingWindowValid(lim Limit, st State, now, _ int64) bool {
	w := st.window()
	return between(w.Count, 0, MaxCount) && between(w.Prev, 0, MaxCount) && w.Start <= now+longestWindow(lim)
}

func slidingWindowUndo(lim Limit, st State, ch Charge, _ int64) State {
	w, charged := st.window(), ch.After.window().Start
	switch h := int64(ch.Applied); w.Start {
	case charged:
		w.Count = max(w.Count-h, 0)
	case windowAfter(lim, charged):
		w.Prev = max(w.Prev-h, 0)
	}
	return w.state(st.ExpiresAt)
}

// slidingWindowRefund takes hits off the current window's count first,
// then off the previous window's, each down to 0.
func slidingWindowRefund(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	start, end, cur, prev := slidingWindowAt(lim, st, now)
	if lim.Requests == 0 || (cur == 0 && prev == 0) {
		return st, 0
	}
	h := int64(hits)
	fromCur := min(cur, h)
	fromPrev := min(prev, h-fromCur)
	cur, prev = cur-fromCur, prev-fromPrev
	return Window{Start: start, Count: cur, Prev: prev}.state(slidingWindowExpiry(lim, end, cur, prev, now)), uint64(fromCur + fromPrev)
}

// slidingWindowCanonical is the counts of the window current at now and
// of the one before it, fresh when both are 0.
func slidingWindowCanonical(lim Limit, st State, now int64) State {
	if lim.Requests == 0 {
		return State{}
	}
	start, end, cur, prev := slidingWindowAt(lim, st, now)
	if cur == 0 && prev == 0 {
		return State{}
	}
	return Window{Start: start, Count: cur, Prev: prev}.state(slidingWindowExpiry(lim, end, cur, prev, now))
}
