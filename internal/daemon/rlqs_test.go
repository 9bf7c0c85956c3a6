package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// opaque is a store that neither lends nor wraps one.
type opaque struct{}

func (opaque) Take(context.Context, []store.Request) ([]store.Result, error) { return nil, nil }
func (opaque) Close() error                                                  { return nil }

// TestLenderOf: RLQS charges blocks in the store under the decorators
// (the local cache here), and refuses a store that cannot lend.
func TestLenderOf(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	got, err := lenderOf(localcache.New(mem, 1<<20))
	if err != nil || got != store.Lender(mem) {
		t.Fatalf("lenderOf(localcache(memstore)) = %v, %v; want the memstore", got, err)
	}
	if _, err := lenderOf(opaque{}); err == nil || !strings.Contains(err.Error(), "cannot lend") {
		t.Fatalf("lenderOf(opaque) error %v, want one saying it cannot lend", err)
	}
}
