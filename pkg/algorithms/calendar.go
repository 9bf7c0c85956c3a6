package algorithms

import "time"

// Month is the nominal length of a month in a Period (envoyproxy's unit:
// month): a Limit with Calendar set counts Period/Month calendar months.
const Month = 30 * 24 * time.Hour

const dayMicros = int64(24 * time.Hour / time.Microsecond)

// longestMonth bounds the length of one calendar month, so that n of them
// last at most n*longestMonth (the horizon of a calendar window).
const longestMonth = 31 * 24 * time.Hour

// months is how many calendar months one window of l spans: Period/Month
// when l.Calendar is set, else 0.
func (l Limit) months() int64 {
	if !l.Calendar {
		return 0
	}
	return int64(l.Period / Month)
}

// windowAt is the window of l holding now (Unix µs, >= 0): its start and
// end. Windows are aligned to the Unix epoch: Period long, or with
// Calendar, months() UTC calendar months whose first month's index since
// January 1970 is a multiple of months() (3 months: quarters from January).
func windowAt(l Limit, now int64) (start, end int64) {
	if n := l.months(); n > 0 {
		i := monthIndex(now)
		i -= floorMod(i, n)
		return monthStart(i), monthStart(i + n)
	}
	p := l.Period.Microseconds()
	start = now - floorMod(now, p)
	return start, start + p
}

// windowAfter is the end of the window of l that starts at start.
func windowAfter(l Limit, start int64) int64 {
	if n := l.months(); n > 0 {
		return monthStart(monthIndex(start) + n)
	}
	return start + l.Period.Microseconds()
}

// windowBefore is the start of the window of l before the one starting at
// start.
func windowBefore(l Limit, start int64) int64 {
	if n := l.months(); n > 0 {
		return monthStart(monthIndex(start) - n)
	}
	return start - l.Period.Microseconds()
}

// isWindowStart reports whether t starts a window of l.
func isWindowStart(l Limit, t int64) bool {
	start, _ := windowAt(l, t)
	return start == t
}

// longestWindow is the longest a window of l lasts, in µs: Period, or
// months() of the longest months.
func longestWindow(l Limit) int64 {
	if n := l.months(); n > 0 {
		return n * longestMonth.Microseconds()
	}
	return l.Period.Microseconds()
}

// monthIndex is the number of whole UTC months from January 1970 to the
// month holding us (Unix µs): 0 for January 1970, negative before it.
func monthIndex(us int64) int64 {
	y, m := civilFromDays(floorDiv(us, dayMicros))
	return (y-1970)*12 + m - 1
}

// monthStart is the first µs of month i (see monthIndex).
func monthStart(i int64) int64 {
	return daysFromCivil(1970+floorDiv(i, 12), floorMod(i, 12)+1) * dayMicros
}

// civilFromDays is the proleptic Gregorian year and month (1-12) of day z
// since 1970-01-01, in integers only (Howard Hinnant's civil_from_days), so
// that the Lua scripts compute the very same months from Redis TIME
// (internal/scripts/lua/calendar.lua).
func civilFromDays(z int64) (year, month int64) {
	z += 719468 // days from 0000-03-01 to 1970-01-01
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365], from March 1
	mp := (5*doy + 2) / 153                                // [0, 11], March = 0
	month = mp + 3
	if mp >= 10 {
		month = mp - 9
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month
}

// daysFromCivil is the day since 1970-01-01 of the first of month (1-12)
// of year (Howard Hinnant's days_from_civil, for day 1).
func daysFromCivil(year, month int64) int64 {
	if month <= 2 {
		year--
	}
	era := floorDiv(year, 400)
	yoe := year - era*400 // [0, 399]
	mp := month - 3       // March = 0
	if month <= 2 {
		mp = month + 9
	}
	doy := (153*mp + 2) / 5 // day 1 of the month, from March 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
