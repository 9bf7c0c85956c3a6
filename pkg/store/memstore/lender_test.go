package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/storetest"
)

// TestLender: TakeCharged reports what an admitted batch charged (Spare
// top-ups included when they fit), nothing for a denied batch, and Return
// gives back exactly the hits returned; a canceled or closed store returns
// nothing.
// lenderLimit is the limit of every request of TestLender.
var lenderLimit = window(10, time.Minute)

// lenderCase is one batch of TestLender: the charges TakeCharged reports,
// the hits of key "a"'s charge handed back, the context of Return, and
// what "a" has left afterwards.
type lenderCase struct {
	name        string
	reqs        []store.Request
	wantCharges map[string]uint64 // key -> hits
	give        uint64            // hits of the "a" charge handed back
	ctx         func() context.Context
	wantErr     bool
	wantLeft    uint64 // a's remaining after Return
}

var lenderCases = []lenderCase{{
	name:        "enforce plus spare top-up, part returned",
	reqs:        []store.Request{{Key: "a", Limit: lenderLimit, Hits: 1}, {Key: "a", Limit: lenderLimit, Hits: 5, Mode: algorithms.Spare}},
	wantCharges: map[string]uint64{"a": 6},
	give:        4,
	wantLeft:    8,
}, {
	name:        "spare that does not fit is neither charged nor denying",
	reqs:        []store.Request{{Key: "a", Limit: lenderLimit, Hits: 2}, {Key: "b", Limit: lenderLimit, Hits: 11, Mode: algorithms.Spare}},
	wantCharges: map[string]uint64{"a": 2},
	give:        2,
	wantLeft:    10,
}, {
	name:        "denied batch charges nothing",
	reqs:        []store.Request{{Key: "a", Limit: lenderLimit, Hits: 3, Mode: algorithms.Spare}, {Key: "b", Limit: lenderLimit, Hits: 11}},
	wantCharges: nil,
	wantLeft:    10,
}, {
	name:        "canceled return leaves the charge",
	reqs:        []store.Request{{Key: "a", Limit: lenderLimit, Hits: 3}},
	wantCharges: map[string]uint64{"a": 3},
	give:        3,
	ctx: func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	},
	wantErr:  true,
	wantLeft: 7,
}}

func TestLender(t *testing.T) {
	for _, tt := range lenderCases {
		t.Run(tt.name, func(t *testing.T) { checkLender(t, tt) })
	}
	t.Run("closed", func(t *testing.T) {
		s := memstore.New()
		_, charges, err := s.TakeCharged(t.Context(), []store.Request{{Key: "a", Limit: lenderLimit, Hits: 1}})
		if err != nil || len(charges) != 1 {
			t.Fatalf("TakeCharged: %v, %+v", err, charges)
		}
		s.Close()
		if err := s.Return(t.Context(), charges); !errors.Is(err, memstore.ErrClosed) {
			t.Fatalf("Return after Close: %v, want ErrClosed", err)
		}
	})
}

// checkLender takes tt's batch, checks its charges, hands back tt.give of
// "a"'s a second later, and checks what "a" has left.
func checkLender(t *testing.T, tt lenderCase) {
	clock := storetest.NewClock(storetest.Epoch())
	s := memstore.New(memstore.WithClock(clock.Now), memstore.WithSweep(0, 0))
	defer s.Close()
	_, charges, err := s.TakeCharged(t.Context(), tt.reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(charges) != len(tt.wantCharges) {
		t.Fatalf("charges %+v, want %v", charges, tt.wantCharges)
	}
	var give []store.Charge
	for _, c := range charges {
		if c.Applied != tt.wantCharges[c.Key] {
			t.Errorf("charge of %s: %d hits, want %d", c.Key, c.Applied, tt.wantCharges[c.Key])
		}
		if c.Key == "a" && tt.give > 0 {
			c.Applied = tt.give
			give = append(give, c)
		}
	}
	clock.Advance(time.Second)
	ctx := t.Context()
	if tt.ctx != nil {
		ctx = tt.ctx()
	}
	if err := s.Return(ctx, give); (err != nil) != tt.wantErr {
		t.Fatalf("Return: %v, want error %v", err, tt.wantErr)
	}
	check := store.Request{Key: "a", Limit: lenderLimit, Hits: 0}
	if got := mustTake(t, s, check)[0].Remaining; got != tt.wantLeft {
		t.Errorf("a: remaining %d after Return, want %d", got, tt.wantLeft)
	}
}
