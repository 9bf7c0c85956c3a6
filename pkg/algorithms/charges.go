package algorithms

import (
	"slices"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/satmath"
)

// Charge is what an admitted batch charged one key (Batch.Charges), as
// Undo takes it back: the key and its limit, what the batch's ops applied
// there, in the algorithm's unit (Batch.Applied), and the state it wrote
// (for sliding_log, After.Log holds only the entries the batch added).
// store.Charge and the scripts' Charge are this type.
type Charge struct {
	Key     string
	Limit   Limit
	Applied uint64
	After   State
}

// chargeAcc is what a batch's ops applied to one key, toward its charge.
type chargeAcc struct {
	limit Limit // the first op's
	// mixed: an op named the key under another limit.
	mixed bool
	// applied is what its ops applied, usage included (refunds are not
	// ops of the batch that charges: they came first).
	applied uint64
	// usage: a usage op has hits; other: an op of another kind applied
	// something.
	usage, other bool
	// added is, for a log, the entries its ops but usage added.
	added []LogEntry
}

// add counts op, which applied applied, taking its key's state from
// before to after at now.
func (a *chargeAcc) add(op Op, applied uint64, before, after State, now time.Time) {
	if op.Limit != a.limit {
		a.mixed = true
	}
	if op.Usage && op.Hits > 0 {
		// Recorded whatever the verdict: a denied batch may record more of
		// it than this one could (charge).
		a.usage = true
	}
	if applied == 0 {
		return
	}
	a.applied = satmath.Add(a.applied, applied)
	if op.Usage {
		return
	}
	a.other = true
	if len(after.Log) > 0 {
		if e, ok := addedEntry(op.Limit, before, after, now); ok {
			a.added = append(a.added, e)
		}
	}
}

// charge is the key's charge in an admitted batch that wrote st: what its
// ops but usage applied, less what the batch's usage would have applied
// had they not been there (usage, the usage-only pass's: a bucket's floor,
// a meter's cap or a TAT's bound may have absorbed part of the usage after
// them, which a denied batch records in full); for a log the entries its
// ops but usage added. ok is false when there is nothing to take back, or
// the key was named under two limits.
func (a *chargeAcc) charge(key string, st State, usage func() uint64) (Charge, bool) {
	if a.mixed || !a.other {
		return Charge{}, false
	}
	c := Charge{Key: key, Limit: a.limit}
	if a.limit.Algorithm.Info().Log {
		for _, e := range a.added {
			c.Applied += uint64(e.Hits)
		}
		c.After = State{Log: a.added, ExpiresAt: st.ExpiresAt}
		return c, c.Applied > 0
	}
	c.Applied, c.After = a.applied, st
	if a.usage {
		c.Applied -= min(c.Applied, usage())
	}
	return c, c.Applied > 0
}

// usageApplied is what the usage ops of ops on key apply from st, the
// key's stored state: the pass a denied batch runs.
func usageApplied(ops []Op, key string, st State, now time.Time) uint64 {
	var sum uint64
	for _, op := range ops {
		if op.Key == key && op.Usage {
			var applied uint64
			_, st, _, applied = record(op.Limit, st, op.Hits, now)
			sum = satmath.Add(sum, applied)
		}
	}
	return sum
}

// addedEntry is the log entry an op under lim added going from before to
// after at now: the one at now that before, as the op read it (out of its
// range: fresh), did not hold (an op adds one at most).
func addedEntry(lim Limit, before, after State, now time.Time) (LogEntry, bool) {
	_, read, us, _ := read(lim, before, now)
	for i := len(after.Log) - 1; i >= 0; i-- {
		if e := after.Log[i]; e.At == us && !slices.Contains(read.Log, e) {
			return e, true
		}
	}
	return LogEntry{}, false
}
