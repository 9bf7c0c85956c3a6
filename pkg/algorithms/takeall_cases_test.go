package algorithms

import (
	"time"
)

// takeAllSpare: a Spare op (a lease top-up riding on a request) is taken
// only if it fits, never denying, never recorded past its limit.
var takeAllSpare = map[string]takeAllCase{
	"an admitted batch charges an allowed Spare op": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "b", Limit: fwMinute(5), Hits: 3, Mode: Spare}},
		want: []Decision{ok(4, 40*s), ok(2, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.state(t0.UnixMicro() + 40e6),
			"b": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a denied Spare op denies nothing and is not charged": {
		stored: map[string]State{"b": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 1}, {Key: "b", Limit: fwMinute(3), Hits: 2, Mode: Spare}},
		want:   []Decision{ok(4, 40*s), no(1, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 1}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a Spare op alone over its limit is denied and writes nothing": {
		ops:  []Op{{Key: "b", Limit: fwMinute(3), Hits: 4, Mode: Spare}},
		want: []Decision{no(3, 40*s, Never)},
	},
	"a denied batch charges no Spare op": {
		ops:  []Op{{Key: "b", Limit: fwMinute(5), Hits: 2, Mode: Spare}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want: []Decision{ok(5, 40*s), no(1, 40*s, Never)},
	},
	"a Spare op after an Enforce op on one key sees the running total": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 3}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: Spare}},
		want: []Decision{ok(2, 40*s), no(2, 40*s, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 3}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a Spare op that fits the running total is charged with it": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 3}, {Key: "a", Limit: fwMinute(5), Hits: 2, Mode: Spare}},
		want: []Decision{ok(2, 40*s), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.state(t0.UnixMicro() + 40e6),
		},
	},
	"an Enforce op after a denied Spare op on one key is not held back by it": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 6, Mode: Spare}, {Key: "a", Limit: fwMinute(5), Hits: 5}},
		want: []Decision{no(5, 40*s, Never), ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.state(t0.UnixMicro() + 40e6),
		},
	},
}

// takeAllAtRest: a key left at rest is written expired for good.
var takeAllAtRest = map[string]takeAllCase{
	// A key left at rest (here a full bucket, by a check under a lower
	// Burst) is written expired for good, however the batch ends: an
	// op with an invalid limit after it drops it through Take in the
	// denied batch, and a clock that goes back must not tell the two
	// apart (take.lua deletes the key either way).
	"a key left at rest is written expired": {
		ops:  []Op{{Key: "a", Limit: tb10, Hits: 1}, {Key: "a", Limit: Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second, Burst: 1}}},
		want: []Decision{ok(9, 100*ms), ok(1, 0)},
		wantWrites: map[string]State{
			"a": {ExpiresAt: 1},
		},
	},
	"a key left at rest is written expired in a denied batch too": {
		ops: []Op{
			{Key: "a", Limit: tb10, Hits: 1, Usage: true},
			{Key: "a", Limit: Limit{Algorithm: TokenBucket, Requests: 10, Period: time.Second, Burst: 1}, Usage: true},
			{Key: "a", Limit: Limit{Algorithm: TokenBucket, Requests: 10}, Usage: true},
		},
		want: []Decision{ok(9, 100*ms), ok(1, 0), no(0, 0, Never)},
		wantWrites: map[string]State{
			"a": {ExpiresAt: 1},
		},
	},
}

// takeAllRefunds: refunds (NegativeHits) are applied first, whatever the
// verdict; the other ops are judged on the refunded states.
var takeAllRefunds = map[string]takeAllCase{
	"a refund is kept in a denied batch": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.state(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}, {Key: "d", Limit: fwMinute(1), Hits: 2}},
		want:   []Decision{ok(3, 40*s), no(1, 40*s, Never)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
		},
	},
	"an admission is judged after the refunds, wherever they are": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 5}.state(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(5), Hits: 2}, {Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}},
		want:   []Decision{ok(1, 40*s), ok(3, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 4}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a refund is allowed past the limit too": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 25}.state(t0.UnixMicro() + 40e6)},
		ops:    []Op{{Key: "a", Limit: fwMinute(10), Hits: 3, Mode: NegativeHits}},
		want:   []Decision{ok(0, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 22}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a refund of a fresh key writes nothing": {
		ops:  []Op{{Key: "a", Limit: fwMinute(5), Hits: 3, Mode: NegativeHits}},
		want: []Decision{ok(5, 40*s)},
	},
	"a refund ends a quota alternative": {
		ops: []Op{
			{Key: "q1", Limit: fwMinute(1), Hits: 2, Mode: Quota},
			{Key: "r", Limit: fwMinute(5), Hits: 1, Mode: NegativeHits},
			{Key: "q2", Limit: fwMinute(5), Hits: 2, Mode: Quota, Joined: true},
		},
		want: []Decision{recorded(1, 40*s, 40*s), ok(5, 40*s), ok(3, 40*s)},
		wantWrites: map[string]State{
			"q1": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
			"q2": Window{Start: t0.UnixMicro() - 20e6, Count: 2}.state(t0.UnixMicro() + 40e6),
		},
	},
	"usage, an admission and a refund on one key": {
		stored: map[string]State{"a": Window{Start: t0.UnixMicro() - 20e6, Count: 9}.state(t0.UnixMicro() + 40e6)},
		ops: []Op{
			{Key: "a", Limit: fwMinute(10), Hits: 2},
			{Key: "a", Limit: fwMinute(10), Hits: 4, Usage: true},
			{Key: "a", Limit: fwMinute(10), Hits: 5, Mode: NegativeHits},
		},
		want: []Decision{ok(4, 40*s), ok(0, 40*s), ok(6, 40*s)},
		wantWrites: map[string]State{
			"a": Window{Start: t0.UnixMicro() - 20e6, Count: 10}.state(t0.UnixMicro() + 40e6),
		},
	},
	"a refund to fresh writes the key expired": {
		stored: map[string]State{"a": Bucket{Last: t0.UnixMicro(), Tokens: 4}.state(t0.UnixMicro() + 600e3)},
		ops:    []Op{{Key: "a", Limit: tb10, Hits: 7, Mode: NegativeHits}},
		want:   []Decision{ok(10, 0)},
		wantWrites: map[string]State{
			"a": {ExpiresAt: 1},
		},
	},
}
