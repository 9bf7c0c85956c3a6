package lease_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/lease"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// hangingRedis is a TCP proxy in front of a real redis-server that, once
// frozen, keeps accepting connections and reading commands but never
// forwards them: a Redis that hangs.
type hangingRedis struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	asked  atomic.Int64 // reads swallowed while frozen
	mu     sync.Mutex
	conns  []net.Conn
}

func newHangingRedis(t *testing.T, target string) *hangingRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangingRedis{ln: ln, target: target}
	go h.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

func (h *hangingRedis) serve() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", h.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		h.mu.Lock()
		h.conns = append(h.conns, c, up)
		h.mu.Unlock()
		go func() { _, _ = io.Copy(c, up) }()
		go h.forward(c, up)
	}
}

func (h *hangingRedis) forward(c, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if h.frozen.Load() {
			h.asked.Add(1)
			continue
		}
		if _, err := up.Write(buf[:n]); err != nil {
			return
		}
	}
}

// Shutdown on a Redis that stopped answering, with the sweeper waiting on
// it for a refill: Stop returns by the deadline it is given (the
// daemon's SHUTDOWN_TIMEOUT), cancelling the sweeper's call and giving up
// the return (its hits lapse: under-admission), and Close after it adds
// nothing of its own timeout. Before, the sweeper's calls ran on
// context.Background with 5 s each, and Close's return another 5 s.
func TestStopWithinDeadlineOnAHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	proxy := newHangingRedis(t, srv.Addr)
	rs, err := redisstore.New(redisstore.WithAddr(proxy.ln.Addr().String()), redisstore.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ls := lease.New(rs, lease.WithSweep(10*time.Millisecond), lease.WithTarget(time.Second))
	lim := fixed(1_000_000, 24*time.Hour)
	ctx := context.Background()
	for i := 0; ls.Stats().LocalHits == 0; i++ {
		if i == 1000 {
			t.Fatal("no hit answered from a lease after 1000")
		}
		if _, err := ls.Take(ctx, []store.Request{hit("k", lim, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	// Redis hangs; the lease is used down to one hit, locally, so that the
	// sweeper's next pass asks the hung Redis for a refill.
	proxy.frozen.Store(true)
	if held := ls.Stats().Outstanding; held > 1 {
		res, err := ls.Take(ctx, []store.Request{hit("k", lim, held-1)})
		if err != nil || !res[0].Allowed {
			t.Fatalf("local take of %d: %+v, %v", held-1, res, err)
		}
	}
	for wait := time.Now().Add(10 * time.Second); proxy.asked.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the sweeper never called the hung Redis")
		}
	}

	const deadline = 2 * time.Second
	stopCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	stopErr := ls.Stop(stopCtx)
	closeErr := ls.Close()
	took := time.Since(start)
	t.Logf("Stop and Close took %s with a %s deadline (Stop: %v; Close: %v)", took, deadline, stopErr, closeErr)
	// The bound is the deadline plus a margin for a loaded machine, well
	// short of the sweeper's own 5 s timeout.
	if took > deadline+2*time.Second {
		t.Errorf("Stop and Close took %s, past the %s deadline", took, deadline)
	}
	if stopErr == nil {
		t.Error("Stop reported no error although its return could not reach Redis")
	}
	if st := ls.Stats(); st.Outstanding != 0 || st.Lapsed == 0 || st.ReturnErrors == 0 {
		t.Errorf("stats after Stop %+v: want nothing held and the unreturned hit lapsed", st)
	}
}
