package algorithms

import (
	"cmp"
	"slices"
)

// slidingLog is the exact sliding window: one entry per admitted request.
// Seq is 1 + the highest at that µs (an Undo may have removed one below), so
// entries stay unique; in Redis it is a ZSET plus a "~sum" member.
// State, TTL and answers: docs/algorithms.md#sliding_log.
func slidingLog(lim Limit, st State, hits uint64, now int64) (Decision, State) {
	if lim.Requests == 0 {
		return zeroRate(st, hits)
	}
	p, r := lim.Period.Microseconds(), int64(lim.Requests)
	log := st.Log
	for len(log) > 0 && log[0].At <= now-p {
		log = log[1:]
	}
	var sum int64
	for _, e := range log {
		sum += e.Hits
	}
	room := r - sum
	reset := int64(0)
	if len(log) > 0 {
		reset = log[len(log)-1].At + p - now
	}
	if hits > uint64(r) {
		return Decision{Remaining: uint64(max(room, 0)), ResetAfter: micros(reset), RetryAfter: Never}, st
	}
	if room < 0 || hits > uint64(room) {
		return Decision{
			Remaining:  uint64(max(room, 0)),
			ResetAfter: micros(reset),
			RetryAfter: micros(logRoomAt(log, sum-(r-int64(hits))) + p - now),
		}, st
	}
	if hits > 0 {
		// Insert after every entry at or before now: a clock that went
		// back leaves newer entries at the end.
		i, seq := len(log), int64(1)
		for i > 0 && log[i-1].At > now {
			i--
		}
		for j := i - 1; j >= 0 && log[j].At == now; j-- {
			seq = max(seq, log[j].Seq+1)
		}
		log = slices.Insert(slices.Clip(log), i, LogEntry{At: now, Seq: seq, Hits: int64(hits)})
	}
	// An empty log is a fresh key: already expired (at 1µs, so even a clock
	// that goes back reads it as fresh), so a store drops it.
	next := State{ExpiresAt: 1}
	reset = 0
	if len(log) > 0 {
		next = State{Log: log, ExpiresAt: log[len(log)-1].At + p}
		reset = next.ExpiresAt - now
	}
	return Decision{Allowed: true, Remaining: uint64(room - int64(hits)), ResetAfter: micros(reset)}, next
}

// logRoomAt is the At of the oldest entry whose leaving, with every entry
// before it, frees at least excess hits (0 < excess <= the log's sum).
// Entries with one At leave together, so stopping inside such a group
// gives the same At.
func logRoomAt(log []LogEntry, excess int64) int64 {
	freed := int64(0)
	for _, e := range log {
		freed += e.Hits
		if freed >= excess {
			return e.At
		}
	}
	return log[len(log)-1].At
}

// slidingLogForce logs hits past the limit as one entry at now, which
// leaves the window a Period later like any other; the log's sum stays
// within MaxCount. It is what slidingLog admits under a limit of MaxCount.
func slidingLogForce(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	var sum int64
	for _, e := range st.Log {
		if e.At > now-lim.Period.Microseconds() {
			sum += e.Hits
		}
	}
	hits = min(hits, uint64(max(MaxCount-sum, 0)))
	if hits == 0 {
		return st, 0
	}
	lim.Requests = MaxCount
	_, next := slidingLog(lim, st, hits, now)
	return next, hits
}

func slidingLogHorizon(l Limit) int64 { return l.Period.Microseconds() }

func slidingLogValid(_ Limit, st State, now, h int64) bool {
	var sum int64
	for _, e := range st.Log {
		sum += e.Hits
	}
	return between(sum, 1, MaxCount) && st.ExpiresAt <= now+2*h && st.Log[len(st.Log)-1].At <= now+h
}

func slidingLogUndo(lim Limit, st State, ch Charge, _ int64) State {
	log := slices.DeleteFunc(slices.Clone(st.Log), func(e LogEntry) bool {
		return slices.Contains(ch.After.Log, e)
	})
	if len(log) == 0 {
		return State{ExpiresAt: 1} // as slidingLog leaves an empty log
	}
	return State{Log: log, ExpiresAt: log[len(log)-1].At + lim.Period.Microseconds()}
}

// slidingLogRefund removes hits from the entries still in the period,
// newest first (an entry that keeps some of its hits keeps its At and
// Seq), and drops the entries that have left it, as a charge does.
func slidingLogRefund(lim Limit, st State, hits uint64, now int64) (State, uint64) {
	if lim.Requests == 0 {
		return st, 0 // no state at a zero rate
	}
	log := st.Log
	for len(log) > 0 && log[0].At <= now-lim.Period.Microseconds() {
		log = log[1:]
	}
	if len(log) == 0 {
		return st, 0
	}
	log = slices.Clone(log)
	left := int64(hits)
	for left > 0 && len(log) > 0 {
		last := &log[len(log)-1]
		if last.Hits > left {
			last.Hits -= left
			left = 0
			break
		}
		left -= last.Hits
		log = log[:len(log)-1]
	}
	given := uint64(int64(hits) - left)
	if len(log) == 0 {
		return State{ExpiresAt: 1}, given // as slidingLog leaves an empty log
	}
	return State{Log: log, ExpiresAt: log[len(log)-1].At + lim.Period.Microseconds()}, given
}

// slidingLogCanonical is the entries still in the period at now, by time
// and then hits, each time's numbered from 1: entries of one time leave
// the window together, so neither their order nor their numbers decide
// anything. An empty log is fresh.
func slidingLogCanonical(lim Limit, st State, now int64) State {
	if lim.Requests == 0 {
		return State{}
	}
	var log []LogEntry
	for _, e := range st.Log {
		if e.At > now-lim.Period.Microseconds() {
			log = append(log, e)
		}
	}
	if len(log) == 0 {
		return State{}
	}
	slices.SortFunc(log, func(a, b LogEntry) int {
		if a.At != b.At {
			return cmp.Compare(a.At, b.At)
		}
		return cmp.Compare(a.Hits, b.Hits)
	})
	for i := range log {
		log[i].Seq = 1
		if i > 0 && log[i-1].At == log[i].At {
			log[i].Seq = log[i-1].Seq + 1
		}
	}
	return State{Log: log, ExpiresAt: log[len(log)-1].At + lim.Period.Microseconds()}
}
