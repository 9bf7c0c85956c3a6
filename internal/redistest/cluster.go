package redistest

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StartCluster runs a Redis Cluster of n masters (no replicas), each a
// redis-server process on 127.0.0.1, with the slots spread by
// `redis-cli --cluster create`. It returns the nodes.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Missing(t, "redis-cli not on PATH")
	}
	nodes := make([]*Server, n)
	addrs := make([]string, n)
	for i := range nodes {
		nodes[i] = Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		addrs[i] = nodes[i].Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, node := range nodes {
		for {
			host, port, _ := strings.Cut(node.Addr, ":")
			out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok: %v\n%s", node.Addr, err, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// Addrs joins the nodes' addresses as REDIS_URL wants them for a cluster.
func Addrs(nodes []*Server) string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	return strings.Join(addrs, ",")
}
