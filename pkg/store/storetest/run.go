// Package storetest is the conformance suite every store.Store passes: the
// same steps, stepped on a fake clock, checked against hand-written
// expectations and against algorithms.TakeAll.
package storetest

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Factory returns a fresh, empty store that reads time from clock. Run closes
// the store when the subtest that asked for it ends, so Close must tolerate
// a second call from the factory's own cleanup.
type Factory func(t *testing.T, clock *Clock) store.Store

// Run runs the whole suite against stores from newStore. Subtests run one
// after another: the concurrency subtests already load the machine.
func Run(t *testing.T, newStore Factory) {
	t.Run("steps", func(t *testing.T) { runSteps(t, newStore) })
	t.Run("all_or_nothing", func(t *testing.T) { testAllOrNothing(t, newStore) })
	RunModes(t, newStore)
	t.Run("same_key_twice", func(t *testing.T) { testSameKeyTwice(t, newStore) })
	t.Run("check_only", func(t *testing.T) { testCheckOnly(t, newStore) })
	t.Run("zero_requests", func(t *testing.T) { testZeroRequests(t, newStore) })
	t.Run("hits_over_capacity", func(t *testing.T) { testHitsOverCapacity(t, newStore) })
	t.Run("invalid_limit", func(t *testing.T) { testInvalidLimit(t, newStore) })
	t.Run("limit_change", func(t *testing.T) { testLimitChange(t, newStore) })
	t.Run("concurrency", func(t *testing.T) { testConcurrency(t, newStore) })
	t.Run("independent_keys", func(t *testing.T) { testIndependentKeys(t, newStore) })
	t.Run("expiry", func(t *testing.T) { testExpiry(t, newStore) })
	t.Run("canceled_context", func(t *testing.T) { testCanceledContext(t, newStore) })
	t.Run("empty_batch", func(t *testing.T) { testEmptyBatch(t, newStore) })
	RunSpread(t, newStore)
	RunExact(t, newStore)
	// Skipped for a store that is not a store.Lender.
	RunLender(t, newStore)
}
