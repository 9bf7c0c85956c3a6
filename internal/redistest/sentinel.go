package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redisproc"
)

// StartSentinel runs one Sentinel process (quorum 1) watching the master at
// masterAddr under name, quick to fail over: the master is declared down
// after one second. It returns the Sentinel's address once it knows the
// master.
func StartSentinel(t testing.TB, name, masterAddr string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Missing(t, "redis-server not on PATH")
	}
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		t.Fatalf("redistest: sentinel master %q: %v", masterAddr, err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	proc, own, err := redisproc.Launch(bin, 0, func(own int) []string {
		// Sentinel rewrites its file, so each attempt writes it afresh.
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\n",
			own, dir, name, host, port, name, name)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return []string{conf, "--sentinel"}
	})
	if err != nil {
		t.Fatalf("redistest: start sentinel: %v", err)
	}
	t.Cleanup(proc.Kill)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(own))
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := sc.GetMasterAddrByName(ctx, name).Result()
		cancel()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: sentinel at %s does not know %s: %v", addr, name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
