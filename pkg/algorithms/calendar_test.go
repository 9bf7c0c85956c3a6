package algorithms

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The integer month arithmetic (which the Lua scripts repeat) agrees with
// Go's calendar from 1970 to the latest supported clock.
func TestMonthArithmetic(t *testing.T) {
	last := monthIndex(maxUnixMicro)
	for i := int64(-24); i <= last+1; i++ {
		want := time.Date(1970, time.Month(1+i), 1, 0, 0, 0, 0, time.UTC).UnixMicro()
		if got := monthStart(i); got != want {
			t.Fatalf("monthStart(%d) = %d, want %d", i, got, want)
		}
		if got := monthIndex(want); got != i {
			t.Fatalf("monthIndex(start of month %d) = %d", i, got)
		}
		if got := monthIndex(want - 1); got != i-1 {
			t.Fatalf("monthIndex(1µs before month %d) = %d", i, got)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		us := rng.Int64N(maxUnixMicro)
		tm := time.UnixMicro(us).UTC()
		if got, want := monthIndex(us), int64(tm.Year()-1970)*12+int64(tm.Month())-1; got != want {
			t.Fatalf("monthIndex(%d) (%s) = %d, want %d", us, tm, got, want)
		}
	}
}

// Windows of n calendar months start on months whose index is a multiple
// of n (quarters from January for 3) and end where the next one starts.
func TestCalendarWindows(t *testing.T) {
	at := func(y int, m time.Month, d int) int64 { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixMicro() }
	for _, tt := range []struct {
		months     int64
		now        int64
		start, end int64
	}{
		{1, at(2027, 2, 28) + 12*3600e6, at(2027, 2, 1), at(2027, 3, 1)},
		{1, at(2028, 2, 29), at(2028, 2, 1), at(2028, 3, 1)},
		{1, at(2027, 12, 31), at(2027, 12, 1), at(2028, 1, 1)},
		{3, at(2027, 5, 17), at(2027, 4, 1), at(2027, 7, 1)},
		{12, at(2027, 5, 17), at(2027, 1, 1), at(2028, 1, 1)},
	} {
		lim := Limit{Algorithm: FixedWindow, Requests: 1, Period: time.Duration(tt.months) * Month, Calendar: true}
		start, end := windowAt(lim, tt.now)
		if start != tt.start || end != tt.end {
			t.Errorf("%d months at %s: window %s..%s, want %s..%s", tt.months, time.UnixMicro(tt.now).UTC(),
				time.UnixMicro(start).UTC(), time.UnixMicro(end).UTC(), time.UnixMicro(tt.start).UTC(), time.UnixMicro(tt.end).UTC())
		}
		if windowAfter(lim, start) != end || windowBefore(lim, end) != start || !isWindowStart(lim, start) || isWindowStart(lim, start+1) {
			t.Errorf("%d months at %s: the windows around it disagree", tt.months, time.UnixMicro(tt.now).UTC())
		}
	}
}

// A monthly fixed window across the end of February 2027 resets on March 1
// with calendar months (USE_CALENDAR_MONTH_RATE_LIMIT), and on March 3, the
// end of the 30-day window counted from the epoch, without.
func TestCalendarMonthResetsAtTheMonthEnd(t *testing.T) {
	feb28 := time.Date(2027, 2, 28, 12, 0, 0, 0, time.UTC)
	mar1 := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	mar3 := time.Date(2027, 3, 3, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name     string
		calendar bool
		reset    time.Time // the end of the window holding Feb 28
		next     time.Duration
	}{
		{"calendar months", true, mar1, 31 * 24 * time.Hour},
		{"30-day windows", false, mar3, 30 * 24 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, alg := range All() {
				if !alg.Info().Calendar {
					continue
				}
				lim := Limit{Algorithm: alg, Requests: 3, Period: Month, Calendar: tt.calendar}
				var st State
				take := func(at time.Time, hits uint64) Decision {
					b := TakeAll([]Op{{Key: "k", Limit: lim, Hits: hits}}, func(string) State { return st }, at)
					if w, ok := b.Writes["k"]; ok {
						st = w
					}
					return b.Decisions[0]
				}
				if d := take(feb28, 3); !d.Allowed || (alg.Info().ResetLag == 0 && d.ResetAfter != tt.reset.Sub(feb28)) {
					t.Fatalf("%s: 3 hits on Feb 28: %s, want allowed with the window ending %s", alg, fmtD(d), tt.reset)
				}
				if d := take(feb28, 1); d.Allowed {
					t.Fatalf("%s: a 4th hit on Feb 28 admitted", alg)
				}
				if alg.Info().ResetLag > 0 {
					// A sliding window: at the window's end the 3 hits weigh in full, and
					// fade over the next window: a hit fits once 2/3 of
					// them are left, a third of that window later.
					n := tt.next.Microseconds()
					if d := take(tt.reset, 1); d.Allowed || d.RetryAfter != time.Duration(n-2*n/3)*time.Microsecond {
						t.Errorf("%s at %s: %s, want denied for a third of %s", alg, tt.reset, fmtD(d), tt.next)
					}
					continue
				}
				if d := take(tt.reset.Add(-time.Microsecond), 1); d.Allowed || d.RetryAfter != time.Microsecond {
					t.Errorf("1µs before %s: %s, want denied until the window's end", tt.reset, fmtD(d))
				}
				if d := take(tt.reset, 1); !d.Allowed || d.ResetAfter != tt.next || st.ExpiresAt != tt.reset.Add(tt.next).UnixMicro() {
					t.Errorf("at %s: %s, expiring at %s; want admitted in a window of %s", tt.reset, fmtD(d), time.UnixMicro(st.ExpiresAt).UTC(), tt.next)
				}
			}
		})
	}
}
