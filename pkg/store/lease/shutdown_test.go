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

// callWatch passes calls to a Lender and keeps the contexts of those
// still running, so that a test tells whether Stop ended them.
type callWatch struct {
	store.Lender
	mu      sync.Mutex
	next    int
	running map[int]context.Context
}

func (w *callWatch) track(ctx context.Context) (done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.next
	w.next++
	w.running[id] = ctx
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.running, id)
	}
}

func (w *callWatch) TakeCharged(ctx context.Context, reqs []store.Request) ([]store.Result, []store.Charge, error) {
	defer w.track(ctx)()
	return w.Lender.TakeCharged(ctx, reqs)
}

func (w *callWatch) Return(ctx context.Context, charges []store.Charge) error {
	defer w.track(ctx)()
	return w.Lender.Return(ctx, charges)
}

// live counts the calls running now and those of them not cancelled.
func (w *callWatch) live() (running, uncancelled int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ctx := range w.running {
		if ctx.Err() == nil {
			uncancelled++
		}
	}
	return len(w.running), uncancelled
}

// callbacksHeld is a context whose deadline passes as soon as something
// is scheduled on it with context.AfterFunc, which it never runs: the
// moment after a deadline's Done closes and before its callbacks start.
// Nothing scheduled, it passes after d.
type callbacksHeld struct {
	context.Context // Background: AfterFunc has no cancelCtx to use
	done            chan struct{}
	expire          func()
}

func newCallbacksHeld(d time.Duration) (context.Context, context.CancelFunc) {
	c := callbacksHeld{Context: context.Background(), done: make(chan struct{})}
	var once sync.Once
	c.expire = func() { once.Do(func() { close(c.done) }) }
	t := time.AfterFunc(d, c.expire)
	return c, func() { t.Stop(); c.expire() }
}

func (c callbacksHeld) Done() <-chan struct{} { return c.done }

func (c callbacksHeld) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c callbacksHeld) AfterFunc(func()) (stop func() bool) {
	c.expire()
	return func() bool { return true }
}

// Shutdown on a Redis that stopped answering, with the sweeper waiting on
// it for a refill: Stop returns by the deadline it is given (the
// daemon's SHUTDOWN_TIMEOUT), cancelling the sweeper's call and giving up
// the return (its hits lapse: under-admission), and Close after it adds
// nothing of its own timeout. Before, the sweeper's calls ran on
// context.Background with 5 s each, and Close's return another 5 s; and
// Stop left cancelling the sweeper's call to a context.AfterFunc, which
// runs after Stop has seen Done close, or never (Stop's return stopped it:
// 1 run in 30 under load): Close then waited out the call's own timeout.
func TestStopWithinDeadlineOnAHungRedis(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration
		stopCtx  func() (context.Context, context.CancelFunc)
	}{
		{"its deadline passes", 2 * time.Second, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 2*time.Second)
		}},
		{"its deadline passes before its callbacks run", time.Second, func() (context.Context, context.CancelFunc) {
			return newCallbacksHeld(time.Second)
		}},
		{"it is done already", 0, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, calls := hungSweeper(t)
			stopCtx, cancel := tc.stopCtx()
			defer cancel()
			start := time.Now()
			stopErr := ls.Stop(stopCtx)
			running, uncancelled := calls.live()
			closeErr := ls.Close()
			took := time.Since(start)
			t.Logf("Stop and Close took %s with a %s deadline (Stop: %v; Close: %v)", took, tc.deadline, stopErr, closeErr)
			if running == 0 || uncancelled != 0 {
				t.Errorf("after Stop, %d of the %d backend calls running were not cancelled, want all (and the sweeper's running)", uncancelled, running)
			}
			// The bound is the deadline plus a margin for a loaded machine, well
			// short of the sweeper's own 5 s timeout.
			if took > tc.deadline+2*time.Second {
				t.Errorf("Stop and Close took %s, past the %s deadline", took, tc.deadline)
			}
			if stopErr == nil {
				t.Error("Stop reported no error although its return could not reach Redis")
			}
			if st := ls.Stats(); st.Outstanding != 0 || st.Lapsed == 0 || st.ReturnErrors == 0 {
				t.Errorf("stats after Stop %+v: want nothing held and the unreturned hit lapsed", st)
			}
		})
	}
}

// hungSweeper is a lease store over a real Redis that hangs once the store
// holds a lease used down to one hit, with the sweeper waiting on it for a
// refill; calls watches its backend calls.
func hungSweeper(t *testing.T) (ls *lease.Store, calls *callWatch) {
	t.Helper()
	srv := redistest.Start(t)
	proxy := newHangingRedis(t, srv.Addr)
	rs, err := redisstore.New(redisstore.WithAddr(proxy.ln.Addr().String()), redisstore.WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	calls = &callWatch{Lender: rs, running: map[int]context.Context{}}
	ls = lease.New(calls, lease.WithSweep(10*time.Millisecond), lease.WithTarget(time.Second))
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
	return ls, calls
}
