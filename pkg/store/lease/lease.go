// Package lease is a store.Store decorator that lets a replica answer a hot
// counter from local memory without ever admitting more than its limit
// (issue 19). The replica takes a block of b hits of the counter from the
// backend in the same round trip as a request that goes there anyway (a
// Spare op behind the request's own op), charged exactly like b hits, and
// then admits hits of that counter from the block until it is used up or
// ends. Every locally admitted hit was therefore charged in the backend
// first: leases can only under-admit.
//
// Which limits lease and why (algorithms.Limit.Leasable):
//
//   - fixed_window, sliding_window: a block belongs to the window it was
//     charged in and ends at that window's end (measured from the local
//     clock read before the round trip, so early, never late). Its unused
//     hits go back exactly (store.Lender.Return) when it ends on idle, max
//     age, ReturnAll or Close, and so do those a renewal trims off; at the
//     window's end there is nothing to give back (the window rolled over).
//   - gcra, leaky_bucket, continuous token_bucket (no refill_interval, no
//     max_debt): a block is b emission slots reserved ahead; slot k of a
//     block may be used only while the local clock is at or before the
//     slot's start (see lease in entry.go). Unused slots lapse by the
//     block's last slot's deadline and are never given back: giving slots
//     back would move the bucket's arrival time back under another
//     replica's later slots.
//   - sliding_log, stepped or indebted token buckets, zero or invalid
//     limits: not leased.
//
// A crashed replica returns nothing: at most its unused blocks stay charged
// until their window ends or their slots lapse (Stats.Outstanding is that
// amount now). Each block is at most min(LEASE_MAX_BLOCK, LEASE_FRACTION of
// what the counter had left), so near the limit blocks vanish and every
// decision goes to the backend: exact, and fair between replicas.
//
// A batch is answered locally only when every op in it is a leased Enforce
// hit (Request.Lease, Mode Enforce, not Usage, Hits > 0) and each of its keys
// holds a live lease with room for the batch's hits on it: all of them are
// admitted, or the whole batch goes to the backend as before (all-or-nothing
// either way). A batch without any Lease op goes straight to the backend.
//
// A key's block is sized from the rate at which this replica sees its hits
// (over the last LEASE_TARGET) and from the backend's latest Remaining for
// it; a window key too cold for that rate but whose last two hits came
// within LEASE_IDLE, or whose last lease served a hit, gets a block of 2
// (blockSize). Blocks ride on a request that goes to the backend anyway,
// or, for a window lease down to half a block, on the sweeper's one refill
// call per sweep (refill.go): leasing adds at most that call, never one
// per request. At LEASE_MAX_AGE the sweeper renews a window lease in
// place, trimmed to its counter's current block size (Store.renew), or
// ends it.
// Leases end on the request path for the keys a request touches and in the
// sweeper for the rest; the hits of ended window leases are given back in
// one Return per sweep.
package lease

import (
	"container/list"
	"context"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Defaults of the options (the LEASE_* settings).
const (
	DefaultTarget        = 5 * time.Second
	DefaultMaxBlock      = 1000
	DefaultFraction      = 0.1
	DefaultIdle          = 30 * time.Second
	DefaultMaxAge        = 30 * time.Second
	DefaultMaxKeys       = 100000
	DefaultSweepInterval = 100 * time.Millisecond
	// returnTimeout bounds one Return of the sweeper or of Close: a
	// backend that does not answer leaves the hits charged (under-admission)
	// rather than holding shutdown.
	returnTimeout = 5 * time.Second
)

// lruMoveEvery is how stale a key's place in its shard's LRU may be (µs).
const lruMoveEvery = int64(time.Second / time.Microsecond)

// numShards is 64 so that the set of shards a batch touches is one uint64,
// locked in index order (no deadlock between multi-key batches).
const numShards = 64

// Store is the leasing decorator. Use New.
type Store struct {
	next     store.Lender
	now      func() time.Time
	interval int64 // LEASE_TARGET in µs: the rate window and the block's aim
	maxBlock uint64
	fraction float64
	idle     int64 // µs; 0: never
	maxAge   int64 // µs; 0: never
	perShard int   // keys tracked per shard; 0: no bound
	every    time.Duration
	seed     maphash.Seed
	// refillAhead: Sweep tops up window leases running low (refill.go).
	refillAhead bool

	shards [numShards]shard

	// pending holds window charges ended on the request path (idle, max
	// age, eviction, a changed rule), given back by the next Sweep or
	// ReturnAll so that no request waits for a Return.
	pendMu  sync.Mutex
	pending []store.Charge

	// lastSweep and lastFull are when a sweep and a full Sweep last ran
	// (µs; 0: never).
	lastSweep, lastFull atomic.Int64

	// Counters the shards' locks do not cover (see shard.counters).
	returned, returnLapsed, returnErrors atomic.Uint64

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	stop      chan struct{}
	stopped   chan struct{}
}

var _ store.Store = (*Store)(nil)

// shard is one lock's worth of tracked keys.
type shard struct {
	mu      sync.Mutex
	entries map[string]*entry
	lru     *list.List // of *entry; front = most recently seen
	// leased is the entries holding a lease: what Sweep visits, a slice
	// (entry.slot is an entry's index + 1) because Sweep walks it once a
	// second and a map's iteration costs several times a slice's.
	leased []*entry
	// used is the leased entries a request used since the last sweep
	// (entry.used marks them): all that SweepUsed visits.
	used []*entry
	// counters change under mu, which the path holds anyway: a global
	// atomic would bounce one cache line between every core serving a hot
	// key. Stats sums them.
	counters counters
	_        [64]byte // keep neighbouring shards' hot fields apart
}

// counters are a shard's share of Stats.
type counters struct {
	blocks, refills, localHits, lapsed uint64
	outstanding                        int64
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock (tests step a fake one); default time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// WithTarget sets how long a block should last at the replica's observed
// rate of its counter; it is also the span that rate is measured over.
// d <= 0 keeps DefaultTarget.
func WithTarget(d time.Duration) Option {
	return func(s *Store) {
		if us := d.Microseconds(); us > 0 {
			s.interval = us
		}
	}
}

// WithMaxBlock bounds a block's hits; below 2 nothing is leased.
func WithMaxBlock(n uint64) Option { return func(s *Store) { s.maxBlock = n } }

// WithFraction bounds a block to this fraction of what its counter had
// left (clamped to 0..1; 0 leases nothing).
func WithFraction(f float64) Option {
	return func(s *Store) {
		if math.IsNaN(f) {
			f = 0
		}
		s.fraction = min(max(f, 0), 1)
	}
}

// WithIdle ends a lease unused this long; d <= 0 never ends one for
// idleness (its window or slots still end it).
func WithIdle(d time.Duration) Option { return func(s *Store) { s.idle = max(d.Microseconds(), 0) } }

// WithMaxAge re-sizes a lease this long after it began: the sweeper keeps
// a window lease that a block would be taken for now, trimmed to one and
// a half such blocks (Store.renew), and ends any other; d <= 0 never does.
func WithMaxAge(d time.Duration) Option {
	return func(s *Store) { s.maxAge = max(d.Microseconds(), 0) }
}

// WithMaxKeys bounds the counters whose rate the replica tracks (n <= 0: no
// bound). The bound is kept per shard (n/64 rounded up each), dropping the
// least recently seen key of the shard (to within a second: a key's place
// moves at most once a second), so the total may pass n by < 64.
func WithMaxKeys(n int) Option {
	return func(s *Store) {
		s.perShard = 0
		if n > 0 {
			s.perShard = (n + numShards - 1) / numShards
		}
	}
}

// WithRefillAhead says whether Sweep tops up window leases whose room fell
// to half a block or less (default true), so that a warm counter's requests do
// not go to the backend when its lease runs out.
func WithRefillAhead(on bool) Option { return func(s *Store) { s.refillAhead = on } }

// WithSweep sets how often the background sweeper (Tick) ends leases,
// gives their hits back and refills them; every <= 0 runs no sweeper, and
// the caller calls Tick or Sweep (tests do, on a fake clock): what they
// give back and the leases used since the last sweep wait for it.
func WithSweep(every time.Duration) Option { return func(s *Store) { s.every = every } }

// New wraps next and starts the sweeper, which Close stops.
func New(next store.Lender, opts ...Option) *Store {
	s := &Store{
		next:        next,
		now:         time.Now,
		interval:    DefaultTarget.Microseconds(),
		maxBlock:    DefaultMaxBlock,
		fraction:    DefaultFraction,
		idle:        DefaultIdle.Microseconds(),
		maxAge:      DefaultMaxAge.Microseconds(),
		every:       DefaultSweepInterval,
		seed:        maphash.MakeSeed(),
		refillAhead: true,
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	WithMaxKeys(DefaultMaxKeys)(s)
	for _, opt := range opts {
		opt(s)
	}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]*entry)
		s.shards[i].lru = list.New()
	}
	if s.every > 0 {
		go s.sweeper()
	} else {
		close(s.stopped)
	}
	return s
}

// Stats are the lease counters since New (Prometheus: ratelimitd_lease_*).
type Stats struct {
	Blocks    uint64 // blocks taken
	Refills   uint64 // of Blocks, those the sweeper took ahead (refill.go)
	LocalHits uint64 // hits admitted from a block
	Returned  uint64 // unused hits given back
	// Lapsed is unused hits that ended without a return: bucket slots,
	// window ends, failed returns.
	Lapsed uint64
	// Outstanding is unused hits held now: what a crash would lose.
	Outstanding uint64
	// ReturnErrors is Return calls the backend failed (their hits are in
	// Lapsed).
	ReturnErrors uint64
}

// Stats reports the counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Returned:     s.returned.Load(),
		Lapsed:       s.returnLapsed.Load(),
		ReturnErrors: s.returnErrors.Load(),
	}
	var outstanding int64
	for i := range s.shards {
		shd := &s.shards[i]
		shd.mu.Lock()
		c := shd.counters
		shd.mu.Unlock()
		st.Blocks += c.blocks
		st.Refills += c.refills
		st.LocalHits += c.localHits
		st.Lapsed += c.lapsed
		outstanding += c.outstanding
	}
	st.Outstanding = uint64(max(outstanding, 0))
	return st
}

// Take answers reqs from leases when every op can be, and otherwise from
// the backend, topping up leases of hot keys in the same call.
func (s *Store) Take(ctx context.Context, reqs []store.Request) ([]store.Result, error) {
	if !anyLease(reqs) {
		return s.next.Take(ctx, reqs)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Read before the round trip: the backend decides at or after it, so
	// deadlines measured from here are early, never late.
	now := s.now().UnixMicro()
	var buf [8]uint8
	idx := s.shardsOf(reqs, buf[:0])
	mask := maskOf(reqs, idx)
	s.lock(mask)
	if res, ok := s.answer(reqs, idx, now); ok {
		s.unlock(mask)
		return res, nil
	}
	ext := s.plan(reqs, idx, now)
	s.unlock(mask)

	if len(ext) == len(reqs) {
		res, err := s.next.Take(ctx, reqs)
		if err == nil {
			s.lock(mask)
			s.learn(reqs, idx, ext, res, nil, now)
			s.unlock(mask)
		}
		return res, err
	}
	res, charges, err := s.next.TakeCharged(ctx, ext)
	s.lock(mask)
	if err != nil {
		s.abandon(reqs, idx, ext)
	} else {
		s.learn(reqs, idx, ext, res, charges, now)
	}
	s.unlock(mask)
	if err != nil {
		return nil, err
	}
	// The caller sees only its own ops' results.
	return res[:len(reqs):len(reqs)], nil
}

// anyLease reports whether any op's rule allows leasing.
func anyLease(reqs []store.Request) bool {
	for i := range reqs {
		if reqs[i].Lease {
			return true
		}
	}
	return false
}

// eligible reports whether op could be answered from a lease: a plain
// enforced hit (a check or a usage report must reach the backend, and a
// shadow or quota denial does not decide the batch the way a lease's
// admission does).
func eligible(op *store.Request) bool {
	return op.Lease && (op.Mode == algorithms.Enforce || op.Mode == 0) && !op.Usage && op.Hits > 0
}

// shardsOf appends the shard of every op (only Lease ops' are used) to idx.
func (s *Store) shardsOf(reqs []store.Request, idx []uint8) []uint8 {
	for i := range reqs {
		var sh uint8
		if reqs[i].Lease {
			sh = s.shardOf(reqs[i].Key)
		}
		idx = append(idx, sh)
	}
	return idx
}

func (s *Store) shardOf(key string) uint8 {
	return uint8(maphash.String(s.seed, key) % numShards)
}

// maskOf is the set of the Lease ops' shards.
func maskOf(reqs []store.Request, idx []uint8) uint64 {
	var m uint64
	for i, sh := range idx {
		if reqs[i].Lease {
			m |= 1 << sh
		}
	}
	return m
}

// lock locks the shards in mask in index order.
func (s *Store) lock(mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Lock()
	}
}

func (s *Store) unlock(mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		s.shards[bits.TrailingZeros64(m)].mu.Unlock()
	}
}

// namedBefore reports whether reqs[i]'s key appears earlier in reqs; a
// request carries a few descriptors, so a scan beats a map.
func namedBefore(reqs []store.Request, i int) bool {
	for j := range i {
		if reqs[j].Key == reqs[i].Key {
			return true
		}
	}
	return false
}

// hitsOn is the hits of reqs' eligible ops on reqs[i]'s key.
func hitsOn(reqs []store.Request, i int) uint64 {
	var h uint64
	for j := i; j < len(reqs); j++ {
		if reqs[j].Key == reqs[i].Key && eligible(&reqs[j]) {
			h += reqs[j].Hits
		}
	}
	return h
}

// usageOn reports whether a usage op in reqs charges key.
func usageOn(reqs []store.Request, key string) bool {
	for i := range reqs {
		if reqs[i].Usage && reqs[i].Hits > 0 && reqs[i].Key == key {
			return true
		}
	}
	return false
}

// answer admits reqs from their keys' leases if every op can be, with the
// shards locked. It allocates nothing but the results.
func (s *Store) answer(reqs []store.Request, idx []uint8, now int64) ([]store.Result, bool) {
	var buf [8]*entry
	ents := buf[:0]
	ok := true
	for i := range reqs {
		op := &reqs[i]
		var e *entry
		if op.Lease {
			e = s.touch(idx[i], op.Key, op.Limit, now)
			if eligible(op) {
				e.observe(now, s.interval, op.Hits)
			}
		}
		ents = append(ents, e)
		if !ok || !eligible(op) || e.lease.kind == none || e.lease.limit != op.Limit {
			ok = false
			continue
		}
		if !namedBefore(reqs, i) && e.lease.room(now) < hitsOn(reqs, i) {
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	res := make([]store.Result, len(reqs))
	for i := range reqs {
		e, l := ents[i], &ents[i].lease
		c := &s.shards[idx[i]].counters
		if lapsed := l.use(now, reqs[i].Hits); lapsed > 0 {
			c.lapse(lapsed)
		}
		l.lastUse = now
		if !e.used {
			e.used = true
			shd := &s.shards[idx[i]]
			shd.used = append(shd.used, e)
		}
		c.localHits += reqs[i].Hits
		c.outstanding -= int64(reqs[i].Hits)
		capacity := l.limit.Requests
		if l.kind == bucket {
			capacity = l.limit.Capacity()
		}
		res[i].Allowed = true
		res[i].Remaining = min(satAdd(e.remaining, l.room(now)), capacity)
		res[i].ResetAfter = time.Duration(max(e.resetAt-now, 0)) * time.Microsecond
	}
	return res, true
}

// plan prepares the backend batch, with the shards locked: reqs, then one
// Spare op per key that is hot, leasable, in reqs as an enforced hit and
// without a lease with room for the batch's hits on it. It returns reqs
// itself when no key needs a block.
func (s *Store) plan(reqs []store.Request, idx []uint8, now int64) []store.Request {
	ext := reqs
	for i := range reqs {
		op := &reqs[i]
		if !eligible(op) || namedBefore(reqs, i) {
			continue
		}
		e := s.shards[idx[i]].entries[op.Key]
		if e == nil || e.inflight || !e.known || e.limit != op.Limit || !op.Limit.Leasable() {
			continue
		}
		if usageOn(reqs, op.Key) {
			// The backend gives no charge for a key usage charged (usage is
			// never given back), and a window block must be returnable.
			continue
		}
		hits := hitsOn(reqs, i)
		if e.lease.kind != none && e.lease.limit == op.Limit && e.lease.room(now) >= hits {
			// It has room: another key kept the batch from being local.
			continue
		}
		b := s.blockSize(e, now, hits)
		if b < 2 || b <= hits {
			continue
		}
		if len(ext) == len(reqs) {
			ext = make([]store.Request, len(reqs), len(reqs)+len(reqs)-i)
			copy(ext, reqs)
		}
		e.inflight = true
		ext = append(ext, store.Request{Key: op.Key, Limit: op.Limit, Hits: b, Mode: algorithms.Spare})
	}
	return ext
}

// blockSize is min(ceil(rate*target), max block, floor(left*fraction)),
// where left is what the counter is expected to have left after the
// batch's own hits on it.
func (s *Store) blockSize(e *entry, now int64, hits uint64) uint64 {
	b := min(e.estimate(now, s.interval), s.maxBlock)
	if b < 2 && s.returning(e) {
		b = min(2, s.maxBlock)
	}
	left := e.remaining - min(hits, e.remaining)
	return min(b, uint64(float64(left)*s.fraction))
}

// returning reports whether e is a window counter too cold for two hits
// per LEASE_TARGET that a block of 2, taken now, would most likely serve:
// its last two hits came within LEASE_IDLE of each other, or its last
// lease served a hit before it ended (a counter that comes back every 10 s
// or so now and then leaves a gap past LEASE_IDLE; its next lease pays off
// as its last did, where a counter seen once a minute does not lease
// again). The sweeper then refills the block in its batch, where without
// it each of the counter's hits is a round trip of its own. Bucket blocks
// are left out: their slots lapse long before such a counter's next hit.
func (s *Store) returning(e *entry) bool {
	switch e.limit.Algorithm {
	case algorithms.FixedWindow, algorithms.SlidingWindow:
	default:
		return false
	}
	return s.idle > 0 && e.seenBefore != 0 && (e.seen-e.seenBefore <= s.idle || e.paid)
}

// abandon clears the top-ups of a batch the backend failed.
func (s *Store) abandon(reqs []store.Request, idx []uint8, ext []store.Request) {
	for _, sp := range ext[len(reqs):] {
		if e := s.shards[idx[firstOn(reqs, sp.Key)]].entries[sp.Key]; e != nil {
			e.inflight = false
		}
	}
}

// firstOn is the index of key's first op in reqs (it is there).
func firstOn(reqs []store.Request, key string) int {
	for i := range reqs {
		if reqs[i].Key == key {
			return i
		}
	}
	return -1
}

// learn records the backend's answer with the shards locked: each leased
// key's latest Remaining and reset, and the blocks its Spare ops took.
// charges is nil when the batch had no Spare op.
func (s *Store) learn(reqs []store.Request, idx []uint8, ext []store.Request, res []store.Result, charges []store.Charge, now int64) {
	if len(res) != len(ext) {
		// Not an answer to this batch: learn nothing, but let the keys
		// top up again.
		s.abandon(reqs, idx, ext)
		return
	}
	admitted := len(ext) > len(reqs) && !store.VerdictOf(reqs, res[:len(reqs)]).Denied()
	for i := range reqs {
		op := &reqs[i]
		if !op.Lease || namedBefore(reqs, i) {
			continue
		}
		// The key's last op in ext (its Spare op, if any) saw every charge
		// the batch made to it.
		last, spare := i, -1
		for j := i + 1; j < len(ext); j++ {
			if ext[j].Key == op.Key {
				last = j
				if j >= len(reqs) {
					spare = j
				}
			}
		}
		e := s.shards[idx[i]].entries[op.Key]
		if e == nil {
			if spare < 0 || !admitted || !res[spare].Allowed {
				continue
			}
			// Evicted during the round trip while its block was being
			// taken: track it again rather than lose the block.
			e = s.touch(idx[i], op.Key, op.Limit, now)
		}
		took := spare >= 0 && admitted && res[spare].Allowed
		if spare >= 0 {
			e.inflight = false
		}
		if e.limit != op.Limit {
			// The rule changed during the round trip: the block was taken
			// under the old one. It stays charged (under-admission).
			if took {
				c := &s.shards[idx[i]].counters
				c.blocks++
				c.lapsed += ext[spare].Hits
			}
			continue
		}
		d := res[last].Decision
		e.remaining, e.known = d.Remaining, true
		e.resetAt = satAddI(now, d.ResetAfter.Microseconds())
		if took {
			s.install(idx[i], e, ext[spare], d, findCharge(charges, op.Key), now)
		}
	}
}

func findCharge(charges []store.Charge, key string) *store.Charge {
	for i := range charges {
		if charges[i].Key == key {
			return &charges[i]
		}
	}
	return nil
}

// install makes a block of sp.Hits, which the backend decided as d when
// asked at now, into e's lease; merged says it joined the lease e held
// (same window) rather than starting one.
func (s *Store) install(sh uint8, e *entry, sp store.Request, d algorithms.Decision, ch *store.Charge, now int64) (merged bool) {
	b := sp.Hits
	c := &s.shards[sh].counters
	c.blocks++
	c.outstanding += int64(b)
	if s.closed.Load() {
		// Close has given everything back already: hold nothing more.
		c.lapse(b)
		return false
	}
	nl := newLease(sp.Limit, b, d, now)
	if nl.kind == window {
		if ch == nil {
			// Without the charge's state the block could not be given back
			// exactly: do not use it.
			c.lapse(b)
			return false
		}
		nl.after = ch.After
		l := &e.lease
		if l.kind == window && l.limit == nl.limit && l.after.Window().Start == nl.after.Window().Start && l.room(now) > 0 {
			// Same window: one lease, one return of what is left of both.
			l.size += b
			l.deadline = min(l.deadline, nl.deadline)
			l.after = nl.after
			l.lastUse = now
			return true
		}
	}
	s.end(sh, e, now)
	e.lease = nl
	s.shards[sh].addLeased(e)
	return false
}

// addLeased puts e in the leased set, if it is not there.
func (shd *shard) addLeased(e *entry) {
	if e.slot == 0 {
		shd.leased = append(shd.leased, e)
		e.slot = len(shd.leased)
	}
}

// dropLeased takes e out of the leased set, if it is there: the last
// entry moves into its place (Sweep walks the set from its end, so the
// entry moved was already visited).
func (shd *shard) dropLeased(e *entry) {
	if e.slot == 0 {
		return
	}
	i, last := e.slot-1, len(shd.leased)-1
	moved := shd.leased[last]
	shd.leased[i], moved.slot = moved, i+1
	shd.leased[last] = nil
	shd.leased = shd.leased[:last]
	e.slot = 0
}

// lapse counts hits of leases that ended without a return.
func (c *counters) lapse(n uint64) {
	c.lapsed += n
	c.outstanding -= int64(n)
}

// touch returns key's entry, creating it (and dropping the shard's least
// recently seen one past the bound), with a lease that has ended dropped.
// A rule changed by reload starts the key over.
func (s *Store) touch(sh uint8, key string, lim algorithms.Limit, now int64) *entry {
	shd := &s.shards[sh]
	e := shd.entries[key]
	if e == nil {
		e = &entry{key: key, limit: lim, rateStart: now, lruAt: now}
		e.el = shd.lru.PushFront(e)
		shd.entries[key] = e
		if s.perShard > 0 && shd.lru.Len() > s.perShard {
			old := shd.lru.Back().Value.(*entry)
			s.end(sh, old, now)
			shd.lru.Remove(old.el)
			delete(shd.entries, old.key)
		}
		return e
	}
	if now-e.lruAt >= lruMoveEvery || now < e.lruAt {
		// A hot key moves once a second, not at every hit: the move
		// writes to its neighbours' cache lines, and the order only picks
		// which key to forget past LEASE_MAX_KEYS.
		shd.lru.MoveToFront(e.el)
		e.lruAt = now
	}
	if e.limit != lim {
		s.end(sh, e, now)
		// It may still be in its shard's used list.
		*e = entry{key: key, limit: lim, rateStart: now, el: e.el, lruAt: e.lruAt, used: e.used}
		return e
	}
	if e.lease.kind != none && s.over(&e.lease, now) {
		s.end(sh, e, now)
	}
	return e
}

// over reports whether a lease has ended at now: its window or last slot,
// idleness or age.
func (s *Store) over(l *lease, now int64) bool {
	return s.spent(l, now) || (s.maxAge > 0 && now-l.born >= s.maxAge)
}

// spent reports whether a lease has ended at now for any reason but its
// age: its window or last slot, or idleness.
func (s *Store) spent(l *lease, now int64) bool {
	return l.room(now) == 0 || (s.idle > 0 && now-l.lastUse >= s.idle)
}

// end ends e's lease on the request path, if it has one: a window's
// unused hits wait in pending for the next Sweep or ReturnAll, so that no
// request waits for a Return.
func (s *Store) end(sh uint8, e *entry, now int64) {
	if e.lease.kind == none {
		return
	}
	if ch, ok := s.endInto(sh, e, now); ok {
		s.pendMu.Lock()
		s.pending = append(s.pending, ch)
		s.pendMu.Unlock()
	}
}

// endInto ends e's lease and returns the charge to give back, if any:
// a window lease's unused hits while its window lasts. Everything else
// unused lapses.
func (s *Store) endInto(sh uint8, e *entry, now int64) (store.Charge, bool) {
	l := e.lease
	e.lease = lease{}
	e.paid = l.kind == window && l.used > 0
	s.shards[sh].dropLeased(e)
	unused := l.unused()
	switch {
	case unused == 0:
		return store.Charge{}, false
	case l.kind != window || l.room(now) == 0:
		// Bucket slots are never given back, and a window that ended
		// took its hits with it.
		s.shards[sh].counters.lapse(unused)
		return store.Charge{}, false
	}
	return s.giveBackCharge(sh, e.key, &l, unused), true
}

// giveBackCharge is the charge that gives hits of window lease l of key
// back, which they leave Outstanding for.
func (s *Store) giveBackCharge(sh uint8, key string, l *lease, hits uint64) store.Charge {
	s.shards[sh].counters.outstanding -= int64(hits)
	return store.Charge{Key: key, Limit: l.limit, Charged: algorithms.Charged{Hits: hits, After: l.after}}
}

func satAdd(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}

func satAddI(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
