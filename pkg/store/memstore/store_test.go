package memstore_test

import (
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func TestConformance(t *testing.T) {
	factory := func(t *testing.T, clock *storetest.Clock) store.Store {
		return memstore.New(memstore.WithClock(clock.Now))
	}
	storetest.Run(t, factory)
}
