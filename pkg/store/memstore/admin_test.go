package memstore_test

import (
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

func TestAdminConformance(t *testing.T) {
	storetest.RunAdmin(t, func(t *testing.T, clock *storetest.Clock) storetest.Admin {
		return memstore.New(memstore.WithClock(clock.Now))
	}, true)
}

// Expired states are neither listed nor reported as reset, and a reset
// keeps the key count right.
func TestAdminSkipsExpired(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer s.Close()
	mustTake(t, s, store.Request{Key: "p:short", Limit: window(5, 10*time.Second), Hits: 1})
	mustTake(t, s, store.Request{Key: "p:long", Limit: window(5, time.Minute), Hits: 1})
	clock.Advance(20 * time.Second)
	keys, next, err := s.List(t.Context(), "p:", "", 10, time.Now().Add(time.Second))
	if err != nil || next != "" || len(keys) != 1 || keys[0] != "p:long" {
		t.Fatalf("List = %q, %q, %v; want [p:long]", keys, next, err)
	}
	existed, err := s.Reset(t.Context(), []string{"p:short", "p:long"})
	if err != nil || existed[0] || !existed[1] {
		t.Fatalf("Reset = %v, %v; want [false true]", existed, err)
	}
	if s.Len() != 0 {
		t.Fatalf("%d keys left after resetting both", s.Len())
	}
}
