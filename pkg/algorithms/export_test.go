package algorithms

import "time"

// The registry's lookups that only the package's external tests need.

// Names lists every algorithm's config name in declaration order.
func Names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.name
	}
	return out
}

func (a Algorithm) Valid() bool { return a.valid() }

func (a Algorithm) UsedMeans() string { return a.usedMeans() }

func NamesOf(has func(Algorithm) bool) string { return namesOf(has) }

func (v Verdict) QuotaDenied() bool { return v.quotaDenied() }

// VerdictOf is the verdict of ops decided as ds (same length and order).
func VerdictOf(ops []Op, ds []Decision) Verdict {
	var v Verdict
	for i, op := range ops {
		v.Add(op.Mode, op.Joined, ds[i].Allowed)
	}
	return v
}

// Record is record for one key (a Usage op alone in its batch).
func Record(lim Limit, st State, hits uint64, now time.Time) (Decision, State) {
	d, next, _, _ := record(lim, st, hits, now)
	return d, next
}

// Refund is refund for one key (a NegativeHits op alone in its batch).
func Refund(lim Limit, st State, hits uint64, now time.Time) (Decision, State) {
	d, next, _ := refund(lim, st, hits, now)
	return d, next
}
