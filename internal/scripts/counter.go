package scripts

import (
	"strconv"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// counterTag is the tag of the window [start, start+p) in a Counter value
// (lua/counter.lua's counter_tag): its index mod counterTags; for a window
// of calendar months (months > 0), its first month's index since January
// 1970 mod counterTags.
func counterTag(start, p, months int64) int64 {
	if months > 0 {
		t := time.UnixMicro(start).UTC()
		return ((int64(t.Year())-1970)*12 + int64(t.Month()) - 1) % counterTags
	}
	if p <= 0 {
		return 0
	}
	t := (start / p) % counterTags
	if t < 0 {
		t += counterTags
	}
	return t
}

// PackCounter is the Redis value the scripts store for a Counter state
// (fixed_window's: State.Window's Count in the window [Start, ExpiresAt)),
// for tools and tests that write one.
func PackCounter(st algorithms.State) string { return PackCounterMonths(st, 0) }

// PackCounterMonths is PackCounter for a limit whose windows are months
// calendar months (calendarMonths; 0 for epoch windows).
func PackCounterMonths(st algorithms.State, months int64) string {
	w := algorithms.ViewOf[algorithms.Window](st)
	return strconv.FormatInt(w.Count*counterTags+counterTag(w.Start, st.ExpiresAt-w.Start, months), 10)
}

// counterValue is the integer v holds where the scripts read one
// (lua/counter.lua's counter_value: decimal digits without a sign or a
// leading zero, below 2^53); ok is false where they read the key as absent.
func counterValue(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 16 || (v[0] == '0' && len(v) > 1) {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n >= maxExact {
		return 0, false
	}
	return n, true
}

// UnpackCounter reads v, a Counter value, for a limit of period p at now:
// the state it holds for the window current then, or the zero State when
// v is another window's; ok is false where the scripts read the key as
// absent. A value holds only a tag of its window (see lua/counter.lua).
func UnpackCounter(v string, p time.Duration, now time.Time) (st algorithms.State, ok bool) {
	n, ok := counterValue(v)
	period := p.Microseconds()
	if !ok || period <= 0 {
		return algorithms.State{}, ok
	}
	us := now.UnixMicro()
	start := us - us%period
	if n%counterTags != counterTag(start, period, 0) {
		return algorithms.State{}, true
	}
	return algorithms.StateOf(algorithms.FixedWindow, algorithms.Window{Start: start, Count: n / counterTags}, start+period), true
}
