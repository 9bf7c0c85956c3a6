package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

func testCanceledContext(t *testing.T, newStore Factory) {
	h := newHarness(t, newStore)
	lim := basic(algorithms.FixedWindow, 3)
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()

	for name, ctx := range map[string]context.Context{"canceled": canceled, "deadline": expired} {
		res, err := h.s.Take(ctx, reqs(req("k", lim, 1)))
		if err == nil {
			t.Errorf("%s context: Take returned %d results and no error", name, len(res))
		}
		if res != nil {
			t.Errorf("%s context: Take returned results %v along with error %v", name, res, err)
		}
	}
	if got := h.take(req("k", lim, 0))[0]; got.Remaining != 3 {
		t.Errorf("Takes with a dead context consumed: %s", fmtDecision(got))
	}
}
