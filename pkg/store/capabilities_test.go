package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// opaque is a store with no capability beyond Take.
type opaque struct{}

func (opaque) Take(context.Context, []store.Request) ([]store.Result, error) { return nil, nil }
func (opaque) Close() error                                                  { return nil }

// TestDecoratorPassesCapabilities: a decorator lends, returns, resets and
// lists with the store it wraps, and says ErrUnsupported over a store
// that cannot.
func TestDecoratorPassesCapabilities(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(memstore.WithClock(storetest.Epoch))
	var cache store.Store = localcache.New(mem, 1<<20)
	defer cache.Close()
	lender, admin := cache.(store.Lender), cache.(store.Admin)
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}
	req := []store.Request{{Key: "k", Limit: lim, Hits: 4, Mode: algorithms.Enforce}}
	if _, charges, err := lender.TakeCharged(ctx, req); err != nil || len(charges) != 1 {
		t.Fatalf("TakeCharged through the cache: %v charges, %v; want the memstore's one", charges, err)
	} else if err := lender.Return(ctx, charges); err != nil {
		t.Fatalf("Return through the cache: %v", err)
	}
	keys, _, err := admin.List(ctx, "", "", 10, storetest.Epoch().Add(time.Second))
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("List through the cache: %v, %v; want the memstore's k", keys, err)
	}
	if existed, err := admin.Reset(ctx, []string{"k"}); err != nil || !existed[0] {
		t.Fatalf("Reset through the cache: %v, %v; want k deleted", existed, err)
	}

	over := localcache.New(opaque{}, 1<<20)
	if _, _, err := over.TakeCharged(ctx, req); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("TakeCharged over a store that cannot lend: %v, want ErrUnsupported", err)
	}
	if _, err := over.Reset(ctx, []string{"k"}); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("Reset over a store that cannot: %v, want ErrUnsupported", err)
	}
}
