package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/scripts"
	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

var _ store.Admin = (*Store)(nil)

// Reset deletes keys, one DEL each so that a Cluster routes every key to
// its own slot's master (Sentinel: to the master); a DEL that certainly
// did not run is retried like a take. existed[i] says keys[i] was there.
// The keys deleted are published (notices), so that every replica's local
// cache drops its denials of them.
func (s *Store) Reset(ctx context.Context, keys []string) ([]bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	existed := make([]bool, len(keys))
	deleted := 0
	defer func() { s.notices.add(keys[:deleted]) }()
	for i, k := range keys {
		var n int64
		err := s.do(ctx, func(ctx context.Context) error {
			var err error
			n, err = s.client.Del(ctx, k).Result()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("redisstore: reset %d of %d keys: %w", i, len(keys), err)
		}
		existed[i], deleted = n > 0, i+1
	}
	return existed, nil
}

// bound caps ctx with REDIS_TIMEOUT, as Take does.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// scanNode is one master's SCAN progress in a listing cursor. Masters are
// named by address; a master the cursor does not name (a replica promoted
// since, or a master added) is scanned from the start, so a failover
// during a listing can repeat keys but does not lose the ones that stayed.
type scanNode struct {
	Addr   string `json:"a"`
	Cursor uint64 `json:"c"`
	Done   bool   `json:"d,omitempty"`
}

// List returns keys starting with prefix with SCAN MATCH on every master
// (one node on Single and Sentinel), master after master in address order,
// from cursor ("" to start); next is "" once every master is done. It asks
// SCAN for about count keys at a time and stops starting SCANs once it
// has count keys or until has passed (after one SCAN at least, so each
// call makes progress); a SCAN batch is returned whole, so a page may
// hold a few more than count.
func (s *Store) List(ctx context.Context, prefix, cursor string, count int, until time.Time) ([]string, string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	masters, err := s.masters(ctx)
	if err != nil {
		return nil, "", err
	}
	nodes, err := resumeScan(cursor, masters)
	if err != nil {
		return nil, "", err
	}
	match := globEscape(prefix) + "*"
	count = max(count, 1)
	var out []string
	scanned := false
	for i := range nodes {
		n := &nodes[i]
		for !n.Done && len(out) < count && (!scanned || time.Now().Before(until)) {
			scanned = true
			keys, next, err := masters[n.Addr].Scan(ctx, n.Cursor, match, int64(min(max(count-len(out), 32), 1000))).Result()
			if err != nil {
				return nil, "", fmt.Errorf("redisstore: SCAN on %s: %w", n.Addr, err)
			}
			for _, k := range keys {
				if strings.HasPrefix(k, prefix) {
					out = append(out, k)
				}
			}
			n.Cursor, n.Done = next, next == 0
		}
	}
	if !slices.ContainsFunc(nodes, func(n scanNode) bool { return !n.Done }) {
		return out, "", nil
	}
	raw, err := json.Marshal(nodes)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: list cursor: %w", err)
	}
	return out, string(raw), nil
}

// masters maps each master's address to its client: the Cluster's masters,
// or the one client of Single and Sentinel (whose FailoverClient always
// talks to the current master).
func (s *Store) masters(ctx context.Context) (map[string]redis.Cmdable, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return map[string]redis.Cmdable{"": s.client}, nil
	}
	var mu sync.Mutex
	out := map[string]redis.Cmdable{}
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out[c.Options().Addr] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: cluster masters: %w", err)
	}
	return out, nil
}

// resumeScan reads cursor against the current masters, in address order.
func resumeScan(cursor string, masters map[string]redis.Cmdable) ([]scanNode, error) {
	seen := map[string]scanNode{}
	if cursor != "" {
		var prev []scanNode
		if err := json.Unmarshal([]byte(cursor), &prev); err != nil || len(prev) == 0 {
			return nil, fmt.Errorf("redisstore: %w", store.ErrBadCursor)
		}
		for _, n := range prev {
			seen[n.Addr] = n
		}
	}
	nodes := make([]scanNode, 0, len(masters))
	for addr := range masters {
		n, ok := seen[addr]
		if !ok {
			n = scanNode{Addr: addr}
		}
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b scanNode) int { return strings.Compare(a.Addr, b.Addr) })
	return nodes, nil
}

// globEscape makes s match only itself in a SCAN MATCH pattern.
func globEscape(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// State is the state key holds for a counter under lim, as the take
// script reads it (scripts.ReadState) at the store's clock (WithClock) or
// Redis's TIME, for tools and tests: storetest's exact case compares it
// with the reference's.
func (s *Store) State(ctx context.Context, key string, lim algorithms.Limit) (algorithms.State, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var now time.Time
	if s.now != nil {
		now = s.now()
	} else {
		t, err := s.client.Time(ctx).Result()
		if err != nil {
			return algorithms.State{}, fmt.Errorf("redisstore: time: %w", err)
		}
		now = t
	}
	st, err := scripts.ReadState(ctx, s.client, key, lim, now)
	if err != nil {
		return algorithms.State{}, fmt.Errorf("redisstore: %w", err)
	}
	return st, nil
}
