package algorithms

import (
	"math"
	"testing"
	"time"
)

// Large values: 1e9 requests per year, 1e9 hits at once, half-year steps,
// and uint64 hits far beyond anything; products like elapsed*requests reach
// 1.5e22, past both 2^53 and 2^64.
func TestLargeValues(t *testing.T) {
	year := 365 * 24 * time.Hour
	half := year / 2
	for _, alg := range All() {
		t.Run(alg.String(), func(t *testing.T) {
			lim := Limit{Algorithm: alg, Requests: 1e9, Period: year}
			start := time.UnixMicro(31_536_000_000_000 * 54) // a year boundary in 2024
			var st State
			take := func(at time.Duration, hits uint64) Decision {
				d, next := Take(lim, st, hits, start.Add(at))
				if d.Allowed && hits > 0 {
					st = next
				}
				return d
			}
			if d := take(0, 1e9); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("1e9 hits on a fresh key: %s", fmtD(d))
			}
			if d := take(0, math.MaxUint64); d.Allowed || d.RetryAfter != Never {
				t.Fatalf("MaxUint64 hits: %s", fmtD(d))
			}
			d := take(half, 5e8)
			switch {
			case !alg.Info().Bucket && lim.horizon() == lim.Period:
				// A window (or log) of one period still holds 1e9 hits
				// for another half year.
				if d.Allowed || d.RetryAfter != half {
					t.Fatalf("5e8 hits after half a year: %s, want a retry after %s", fmtD(d), half)
				}
			case !alg.Info().Bucket:
				// A sliding window, whose horizon is two periods.
				// At 1.5 years the previous window's 1e9 weighs 5e8.
				if d.Allowed || d.RetryAfter != year {
					t.Fatalf("5e8 hits after half a year: %s", fmtD(d))
				}
			default:
				// Buckets refilled exactly 5e8 of 1e9.
				if !d.Allowed || d.Remaining != 0 || d.ResetAfter != year {
					t.Fatalf("5e8 hits after half a year: %s", fmtD(d))
				}
			}
			if d := take(year+half, 0); !d.Allowed {
				t.Fatalf("check after 1.5 years: %s", fmtD(d))
			}
		})
	}
}
