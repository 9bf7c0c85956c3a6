package algorithms

import "time"

// fixedWindow counts hits in windows aligned to the Unix epoch (or UTC
// calendar months), as envoyproxy does, so its answers match. Over the limit
// is count > Requests, so a check denies only past it. Its family is Counter
// because only the current window's count matters: Redis keeps one integer.
// State, TTL and answers: docs/algorithms.md#fixed_window.
func fixedWindow(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	start, end := windowAt(lim, now)
	count := int64(0)
	if w := st.window(); w.Start == start && w.Count > 0 {
		count = w.Count
	}
	limit := int64(lim.Requests)
	reset := end - now
	room := limit - count
	if room < 0 || hits > uint64(room) {
		d := Decision{Remaining: uint64(max(room, 0)), ResetAfter: micros(reset), RetryAfter: micros(reset)}
		if hits > lim.Requests {
			d.RetryAfter = Never
		}
		return d, st
	}
	count += int64(hits)
	return Decision{Allowed: true, Remaining: uint64(limit - count), ResetAfter: micros(reset)},
		Window{Start: start, Count: count}.state(end)
}

// micros converts µs to a Duration.
func micros(us int64) time.Duration {
	return time.Duration(us) * time.Microsecond
}

// fixedWindowForce counts hits past the limit: the window's count may exceed
// Requests (up to MaxCount) until the window ends.
func fixedWindowForce(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	start, end := windowAt(lim, now)
	count := int64(0)
	if w := st.window(); w.Start == start && w.Count > 0 {
		count = w.Count
	}
	next := max(min(count+int64(hits), MaxCount), count)
	return Window{Start: start, Count: next}.state(end), uint64(next - count)
}

func fixedWindowHorizon(l Limit) int64 { return longestWindow(l) }

func fixedWindowValid(_ Limit, st State, _, _ int64) bool {
	return between(st.window().Count, 0, MaxCount)
}

func fixedWindowUndo(_ Limit, st State, ch Charge, _ int64) State {
	w := st.window()
	if w.Start == ch.After.window().Start {
		w.Count = max(w.Count-int64(ch.Applied), 0)
	}
	return w.state(st.ExpiresAt)
}

// fixedWindowRefund takes hits off the count of the current window, down
// to 0 (envoyproxy's floored decrement). A count of an earlier window is
// already gone: there is nothing to give back.
func fixedWindowRefund(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	start, _ := windowAt(lim, now)
	w := st.window()
	if st.ExpiresAt == 0 || w.Start != start || w.Count <= 0 {
		return st, 0
	}
	given := min(int64(hits), w.Count)
	w.Count -= given
	return w.state(st.ExpiresAt), uint64(given)
}

// fixedWindowCanonical is the current window's count, fresh at 0.
func fixedWindowCanonical(lim Limit, st State, now int64) State {
	start, end := windowAt(lim, now)
	if w := st.window(); w.Start == start && w.Count > 0 {
		return Window{Start: start, Count: w.Count}.state(end)
	}
	return State{}
}
