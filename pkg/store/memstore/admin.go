package memstore

import (
	"container/heap"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

var _ store.Admin = (*Store)(nil)

// Reset deletes keys' states at once (their shards locked together, as a
// Take locks them), so the next request on each starts fresh. existed[i]
// says keys[i] held a live state.
func (s *Store) Reset(ctx context.Context, keys []string) ([]bool, error) {
	var touched uint64
	for _, k := range keys {
		touched |= 1 << (maphash.String(s.seed, k) % numShards)
	}
	s.lockShards(touched)
	defer s.unlockShards(touched)
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	nowMicro := s.now().UnixMicro()
	existed := make([]bool, len(keys))
	for i, k := range keys {
		sh := s.shardOf(k)
		e, ok := sh.entries[k]
		if !ok {
			continue
		}
		existed[i] = e.deadline() > nowMicro
		heap.Remove(&sh.byExpiry, e.index)
		delete(sh.entries, k)
		sh.syncTop()
		s.keys.Add(-1)
	}
	return existed, nil
}

// List returns up to count live keys starting with prefix, in shard order
// and by key within a shard, from cursor ("" to start); next is "" once
// every shard is done. It stops starting shards after until (one shard at
// least, so every call makes progress). A shard's lock is held only while
// its keys are copied, not while they are sorted.
func (s *Store) List(ctx context.Context, prefix, cursor string, count int, until time.Time) ([]string, string, error) {
	shard, after, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	count = max(count, 1)
	var out []string
	for ; shard < numShards; shard, after = shard+1, "" {
		if err := ctx.Err(); err != nil {
			return nil, "", fmt.Errorf("memstore: %w", err)
		}
		keys := s.shards[shard].keysAfter(prefix, after, s.now().UnixMicro())
		slices.Sort(keys)
		if need := count - len(out); len(keys) > need {
			out = append(out, keys[:need]...)
			return out, strconv.Itoa(shard) + ":" + out[len(out)-1], nil
		}
		out = append(out, keys...)
		if len(out) == count || time.Now().After(until) {
			return out, nextShard(shard), nil
		}
	}
	return out, "", nil
}

func (sh *shard) keysAfter(prefix, after string, nowMicro int64) []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var keys []string
	for k, e := range sh.entries {
		if strings.HasPrefix(k, prefix) && k > after && e.deadline() > nowMicro {
			keys = append(keys, k)
		}
	}
	return keys
}

func nextShard(shard int) string {
	if shard+1 >= numShards {
		return ""
	}
	return strconv.Itoa(shard+1) + ":"
}

// parseCursor reads "shard:last key" (the key may hold any byte).
func parseCursor(c string) (int, string, error) {
	if c == "" {
		return 0, "", nil
	}
	num, after, ok := strings.Cut(c, ":")
	shard, err := strconv.Atoi(num)
	if !ok || err != nil || shard < 0 || shard >= numShards {
		return 0, "", fmt.Errorf("memstore: %w", store.ErrBadCursor)
	}
	return shard, after, nil
}

// State is the state key holds (the fresh State when absent or expired),
// for tools and tests: storetest's exact case compares it with the
// reference's. lim is unused: memstore keeps states as the algorithms
// write them.
func (s *Store) State(ctx context.Context, key string, _ algorithms.Limit) (algorithms.State, error) {
	if err := ctx.Err(); err != nil {
		return algorithms.State{}, fmt.Errorf("memstore: %w", err)
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.load(key, s.now().UnixMicro()), nil
}
