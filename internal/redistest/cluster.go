package redistest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartCluster runs a Redis Cluster of n masters (no replicas), each a
// redis-server process on 127.0.0.1, with the slots spread by
// `redis-cli --cluster create`. It returns the nodes.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	return StartClusterWithReplicas(t, n, 0, 2000*time.Millisecond)
}

// StartClusterWithReplicas runs masters masters with replicas replicas each
// (`--cluster-replicas`), with cluster-node-timeout nodeTimeout (a failover
// takes about twice that), and waits until every node reports
// cluster_state:ok and every replica has synced with its master. The first masters
// nodes are the masters, in slot order, as redis-cli assigns them.
func StartClusterWithReplicas(t testing.TB, masters, replicas int, nodeTimeout time.Duration) []*Server {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Missing(t, "redis-cli not on PATH")
	}
	n := masters * (1 + replicas)
	nodes := make([]*Server, n)
	addrs := make([]string, n)
	timeout := strconv.FormatInt(nodeTimeout.Milliseconds(), 10)
	for i := range nodes {
		// No diskless-sync delay: a replica must hold its master's data
		// (and so be eligible for promotion) as soon as the cluster is up.
		nodes[i] = Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", timeout,
			"--repl-diskless-sync-delay", "0")
		addrs[i] = nodes[i].Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			info, err1 := Cli(node.Addr, "cluster", "info")
			topo, err2 := Cli(node.Addr, "cluster", "nodes")
			repl, err3 := Cli(node.Addr, "info", "replication")
			synced := strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up")
			if err1 == nil && err2 == nil && err3 == nil && synced && strings.Contains(info, "cluster_state:ok") &&
				strings.Count(topo, "slave") == masters*replicas && strings.Count(topo, "master") == masters {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: cluster node %s not ok: %v %v\n%s\n%s", node.Addr, err1, err2, info, topo)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// Cli runs redis-cli against addr and returns its output.
func Cli(addr string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}

// Addrs joins the nodes' addresses as REDIS_URL wants them for a cluster.
func Addrs(nodes []*Server) string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr
	}
	return strings.Join(addrs, ",")
}
