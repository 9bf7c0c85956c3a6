package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
)

// backend is one store the binary runs on, for the tests that run the same
// steps on each.
type backend struct {
	name string
	// cluster says the store is a Redis Cluster: nodes are its masters.
	cluster bool
	// start brings the store up and returns the binary's settings for it
	// and the Redis servers it started (none for the embedded store).
	start func(t *testing.T) (env []string, nodes []*redistest.Server)
}

var (
	memoryBackend = backend{name: "memory", start: func(t *testing.T) ([]string, []*redistest.Server) {
		return []string{"BACKEND_TYPE=memory", "REDIS_URL="}, nil
	}}
	redisBackend = backend{name: "redis", start: func(t *testing.T) ([]string, []*redistest.Server) {
		rds := redistest.Start(t)
		return redisEnv(rds.Addr), []*redistest.Server{rds}
	}}
	sentinelBackend = backend{name: "sentinel", start: func(t *testing.T) ([]string, []*redistest.Server) {
		master := redistest.Start(t)
		return []string{"BACKEND_TYPE=redis", "REDIS_TYPE=SENTINEL", "REDIS_URL=mymaster," + redistest.StartSentinel(t, "mymaster", master.Addr)},
			[]*redistest.Server{master}
	}}
	clusterBackend = backend{name: "cluster", cluster: true, start: func(t *testing.T) ([]string, []*redistest.Server) {
		nodes := redistest.StartCluster(t, 3)
		return []string{"BACKEND_TYPE=redis", "REDIS_TYPE=CLUSTER", "REDIS_URL=" + redistest.Addrs(nodes)}, nodes
	}}
)

// masters returns clients of a cluster's masters, from the nodes start
// returned; nil for any other store.
func (be backend) masters(t *testing.T, nodes []*redistest.Server) []*redis.Client {
	if !be.cluster {
		return nil
	}
	return redistest.Clients(t, nodes)
}

// redisEnv is the binary's settings for the single Redis at addr.
func redisEnv(addr string) []string {
	return []string{"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SINGLE", "REDIS_URL=" + addr}
}

// startOn runs one ratelimitd on be with config as its only rules file;
// env comes after be's settings, so it can override them.
func startOn(t *testing.T, be backend, config string, env ...string) (*service, []*redistest.Server) {
	t.Helper()
	beEnv, nodes := be.start(t)
	root, _ := newConfigRoot(t, map[string]string{"it.yaml": config})
	return startService(t, root, append(beEnv, env...)...), nodes
}

// counterKey is the store key of the counter of a one-entry descriptor (see
// config.KeyBuilder: the hash tag is the domain and the entries).
func counterKey(domain, key, value, alg string, window time.Duration) string {
	return fmt.Sprintf("{%s:%d:%s:%d:%s}:%s:%ds", domain, len(key), key, len(value), value, alg, int(window/time.Second))
}

// masterIndex is the index in masters of the node serving key's slot, asked
// of the nodes themselves (every other master answers MOVED), so it holds
// after a reshard too.
func masterIndex(t *testing.T, masters []*redis.Client, key string) int {
	t.Helper()
	for i, m := range masters {
		if err := m.Exists(context.Background(), key).Err(); err == nil {
			return i
		}
	}
	var errs []string
	for _, m := range masters {
		errs = append(errs, fmt.Sprint(m.Get(context.Background(), key).Err()))
	}
	t.Fatalf("no master serves %q: %v", key, errs)
	return -1
}

// valueOn returns the first of prefix0, prefix1, ... whose counter (the key
// keyOf gives for it) lives on master i.
func valueOn(t *testing.T, masters []*redis.Client, i int, prefix string, keyOf func(value string) string) string {
	t.Helper()
	for n := 0; ; n++ {
		v := prefix + strconv.Itoa(n)
		if masterIndex(t, masters, keyOf(v)) == i {
			return v
		}
	}
}

// needGrpcurl fails the test under CI=true, and skips it elsewhere, when
// TestMain could not build grpcurl.
func needGrpcurl(t *testing.T) {
	t.Helper()
	if grpcurlPath == "" {
		redistest.Missing(t, "grpcurl could not be built (go.mod tool directive)")
	}
}
