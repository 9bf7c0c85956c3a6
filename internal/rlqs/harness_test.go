package rlqs_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/rlqs/rlqstest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
)

// rules is a configuration a test swaps (a reload).
type rules struct{ p atomic.Pointer[config.Config] }

func (r *rules) Current() *config.Config { return r.p.Load() }

func newRules(t *testing.T, yaml string) *rules {
	r := &rules{}
	r.set(t, yaml)
	return r
}

func (r *rules) set(t *testing.T, yaml string) {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "rules.yaml", Data: []byte(yaml)}})
	if err != nil {
		t.Fatal(err)
	}
	r.p.Store(cfg)
}

// replica is one in-process ratelimitd serving RLQS on a loopback port.
type replica struct {
	srv   *rlqs.Server
	store store.Lender
	grpc  *grpc.Server
	addr  string
	dead  bool
}

func startReplica(t *testing.T, r rlqs.Rules, lender store.Lender, clock *rlqstest.Clock, opts ...rlqs.Option) *replica {
	t.Helper()
	srv := rlqs.New(r, lender, append([]rlqs.Option{rlqs.WithClock(clock)}, opts...)...)
	gs := grpc.NewServer(rlqs.ServerCodec())
	srv.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	rep := &replica{srv: srv, store: lender, grpc: gs, addr: ln.Addr().String()}
	t.Cleanup(rep.kill)
	return rep
}

// kill stops the replica at once, as SIGKILL would: connections drop, no
// stream is told anything.
func (r *replica) kill() {
	if r.dead {
		return
	}
	r.dead = true
	r.grpc.Stop()
	r.srv.Shutdown()
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func newEnvoy(t *testing.T, clock *rlqstest.Clock, set rlqstest.Settings) *rlqstest.Envoy {
	e := rlqstest.NewEnvoy(set, clock, dial)
	t.Cleanup(e.Close)
	return e
}

// settle waits until every live replica has handled every report sent to
// it and every event its timers raised, and every response it sent has
// reached its Envoy: the fake clock may then move on.
func settle(t *testing.T, reps []*replica, envoys []*rlqstest.Envoy) {
	t.Helper()
	waitQuick(t, "replicas and Envoys to settle", func() bool {
		for _, r := range reps {
			if r.dead {
				continue
			}
			st := r.srv.Stats()
			var sent, received int
			for _, e := range envoys {
				s, rc := e.Counts(r.addr)
				sent += s
				received += rc
			}
			if st.Pending != 0 || int64(sent) != st.Reports+st.Rejected || int64(received) != st.Responses {
				return false
			}
		}
		return true
	})
}

// step moves the clock by d and lets everyone act on it: server timers,
// then Envoys' reports, then the responses.
func step(t *testing.T, clock *rlqstest.Clock, d time.Duration, reps []*replica, envoys []*rlqstest.Envoy) {
	t.Helper()
	clock.Advance(d)
	settle(t, reps, envoys)
	for _, e := range envoys {
		e.Tick()
	}
	settle(t, reps, envoys)
	for _, e := range envoys {
		e.Tick()
	}
}

// waitQuick is testkit.WaitFor for state reached within microseconds most
// of the time: a simulation steps thousands of times.
func waitQuick(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	pause := 10 * time.Microsecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// newMemFleet is n replicas sharing one embedded store and envoys
// Envoys, each on its own replica first (the others after it), from a
// window start.
func newMemFleet(t *testing.T, yaml string, replicas, envoys int, set rlqstest.Settings) (*fleet, *rules) {
	clock := rlqstest.NewClock(windowStart)
	st := memstore.New(memstore.WithClock(clock.Now))
	r := newRules(t, yaml)
	f := newFleet(t, clock, fleetWindow)
	for range replicas {
		f.reps = append(f.reps, startReplica(t, r, st, clock))
	}
	for i := range envoys {
		s := set
		s.Addrs = nil
		for j := range replicas {
			s.Addrs = append(s.Addrs, f.reps[(i+j)%replicas].addr)
		}
		f.envoys = append(f.envoys, newEnvoy(t, clock, s))
	}
	return f, r
}

func keyPrefix(p string) config.KeyBuilder { return config.KeyBuilder{Prefix: p} }
