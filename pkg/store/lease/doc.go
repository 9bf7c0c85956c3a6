// Package lease is a store.Store decorator that lets a replica answer a hot
// counter from local memory without ever admitting more than its limit
// (issue 19). The replica takes a block of b hits of the counter from the
// backend in the same round trip as a request that goes there anyway (a
// Spare op behind the request's own op), charged exactly like b hits, and
// then admits hits of that counter from the block until it is used up or
// ends. Every locally admitted hit was therefore charged in the backend
// first: leases can only under-admit.
//
// Which limits lease, and how, is the algorithm registry's
// (algorithms.Info's WindowLease and BucketLease; Leasable checks the
// limit):
//
//   - WindowLease (fixed_window, sliding_window): a block belongs
//     to the window it was charged in and ends at that window's end
//     (measured from the local clock read before the round trip, so early,
//     never late; Info.ResetLag says how far before ResetAfter that
//     is). Its unused hits go back exactly (store.Lender.Return) when it
//     ends on idle, max age, a rule change, ReturnAll or Close, and so do
//     those a renewal trims off; at the window's end there is nothing to
//     give back (the window rolled over).
//   - BucketLease (gcra, leaky_bucket, continuous token_bucket):
//     a block is b emission slots reserved ahead; slot k of a block may be
//     used only while the local clock is at or before the slot's start (see
//     lease in entry.go). Unused slots lapse by the block's last slot's
//     deadline and are never given back: giving slots back would move the
//     bucket's arrival time back under another replica's later slots.
//   - neither (sliding_log), stepped or indebted token buckets,
//     zero or invalid limits: not leased.
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
// When blocks are taken, how large, and when a lease ends or is renewed are
// all in policy.go. Blocks ride on a request that goes to the backend
// anyway, or, for a window lease down to half a block, on the sweeper's one
// refill call per sweep (refill.go): leasing adds at most that call, never
// one per request.
//
// A lease ends on the request path when a request touches its key and
// finds it over (its window or last slot, idleness, age, a changed rule):
// its unused window hits wait for the sweeper. The sweeper visits the
// leases used since its last pass every sweep interval and every lease once
// a second (sweep.go), ending, renewing and refilling them; each sweep gives
// back what ended in one Return (one call per Cluster slot group) and takes
// its refills in one TakeCharged.
//
// The lifecycle an embedding program needs is the Store's own
// (lifecycle.go): the sweeper starts with the first batch that leases, so
// a store whose rules never lease costs nothing but a check per batch;
// SetRules ends every lease when the rules in force change; Forget drops
// what the replica holds of keys a counters reset deletes; Stop and Close
// give every lease back within a deadline, cancelling the sweeper's calls.
package lease
