package integration

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

const readonlyConfig = `domain: ro
descriptors:
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 1000}
`

// TestFailoverBehindOneAddress is envoyproxy's #1191
// (REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR): ratelimitd reaches Redis
// through one address (a proxy here, as behind a load balancer or a DNS
// name) that moves to the replica when it is promoted. The pooled
// connections still lead to the old master, now a replica answering
// READONLY: each is closed when it does, never reused, and its call is
// retried on a new connection, to the new master. No call fails and every
// admission is counted once.
func TestFailoverBehindOneAddress(t *testing.T) {
	t.Parallel()
	oldMaster := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", portOf(oldMaster.Addr))
	proxy := newSwitchProxy(t, oldMaster.Addr)
	root, _ := newConfigRoot(t, map[string]string{"ro.yaml": readonlyConfig})
	svc := startService(t, root, "REDIS_URL="+proxy.addr(), "REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR=true",
		"REDIS_POOL_SIZE=4", "REDIS_TIMEOUT=5s")

	const callers, perCaller = 8, 10
	burst := func(phase string) {
		t.Helper()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range callers {
			wg.Go(func() {
				for range perCaller {
					resp, err := svc.call(request("ro", desc("tenant", "acme")))
					if err != nil || resp.GetOverallCode() != ok {
						failed.Add(1)
						t.Logf("%s: %v %v", phase, resp.GetOverallCode(), err)
					}
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Fatalf("%s: %d of %d calls failed", phase, n, callers*perCaller)
		}
	}
	burst("before the failover")
	if proxy.open(oldMaster.Addr) == 0 {
		t.Fatal("no pooled connection leads to the master through the proxy")
	}
	old := redis.NewClient(&redis.Options{Addr: oldMaster.Addr})
	defer old.Close()
	ctx := context.Background()
	if err := old.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	// The failover: the replica is promoted, the old master follows it, and
	// the address now leads to the new master.
	if out, err := redistest.Cli(replica.Addr, "REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(out, err)
	}
	if out, err := redistest.Cli(oldMaster.Addr, "REPLICAOF", "127.0.0.1", portOf(replica.Addr)); err != nil {
		t.Fatal(out, err)
	}
	proxy.switchTo(replica.Addr)

	burst("after the failover")
	if n := readonlyErrors(t, old); n == 0 {
		t.Fatal("the old master answered no READONLY: the pooled connections were not put to the test")
	}
	// Every connection that answered READONLY was closed: none whose last
	// command was a script call is left on the old master (others, idle
	// since before the failover, may remain).
	testkit.WaitFor(t, 10*time.Second, "the connections that answered READONLY to be closed", func() bool {
		return scriptClients(t, old) == 0
	})
	resp, err := svc.call(request("ro", withHits(desc("tenant", "acme"), 0)))
	if want := uint32(1000 - 2*callers*perCaller); err != nil || resp.GetStatuses()[0].GetLimitRemaining() != want {
		t.Fatalf("after both bursts: %v %v, want %d left (each admission counted once)", resp, err, want)
	}
}

// scriptClients counts the clients of c's server whose last command was a
// function call.
func scriptClients(t *testing.T, c *redis.Client) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(list, "\n") {
		if strings.Contains(line, " cmd=fcall") {
			n++
		}
	}
	return n
}

// readonlyErrors is the READONLY count in Redis's INFO errorstats.
func readonlyErrors(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "errorstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "errorstat_READONLY:count="); ok {
			n := 0
			for _, c := range rest {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// switchProxy forwards each new connection to the backend in force when it
// was accepted; connections already open keep their backend, as behind a
// load balancer whose target changed.
type switchProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
	conns   map[string]int // backend -> connections open to it
}

func newSwitchProxy(t *testing.T, backend string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, backend: backend, conns: map[string]int{}}
	t.Cleanup(func() { _ = ln.Close() })
	go p.serve()
	return p
}

func (p *switchProxy) addr() string { return p.ln.Addr().String() }

func (p *switchProxy) switchTo(backend string) {
	p.mu.Lock()
	p.backend = backend
	p.mu.Unlock()
}

// open is how many proxied connections to backend are open.
func (p *switchProxy) open(backend string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[backend]
}

func (p *switchProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		backend := p.backend
		p.mu.Unlock()
		go p.pipe(client, backend)
	}
}

func (p *switchProxy) pipe(client net.Conn, backend string) {
	defer client.Close()
	server, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer server.Close()
	p.mu.Lock()
	p.conns[backend]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.conns[backend]--
		p.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done // either side closed: close both
}
