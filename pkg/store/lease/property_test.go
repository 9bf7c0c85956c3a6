package lease_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease/leasetest"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// shared is one replica's handle on the backend every replica shares: a
// replica's Close must not close it for the others.
type shared struct{ *memstore.Store }

func (shared) Close() error { return nil }

// TestProperty is issue 19's "Done when" over memstore (the Redis and
// Redis Cluster runs are in test/integration): three replicas never admit
// more than the limit, crash included, and admit at least 95% of it.
func TestProperty(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	mem := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer mem.Close()
	leasetest.Property(t, clock, func() store.Lender { return shared{mem} })
}
