package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// epochTTL is how long the epoch key outlives the last beat: a Redis that
// kept its data for a day with no replica beating may lose the key, which
// replicas then take for lost data (their pending counts are a day old).
const epochTTL = 24 * time.Hour

// Presence is the replicas of one deployment as Redis sees them, for
// pkg/store/fallback: a sorted set of replica ids scored by the Redis time
// of their last beat (one ZADD and a trim per beat), and an epoch key set
// once and kept while Redis keeps its data. Both share the key's hash tag:
// one Cluster slot, so one MULTI per beat.
type Presence struct {
	client        redis.UniversalClient
	key, epochKey string
	ttl           time.Duration
}

// Presence returns the presence under key (which should carry a hash tag
// of its own, e.g. "{ratelimitd}:replicas"), where a replica counts as live
// for ttl after its last beat.
func (s *Store) Presence(key string, ttl time.Duration) *Presence {
	return &Presence{client: s.client, key: key, epochKey: key + ":epoch", ttl: ttl}
}

// Beat records id as live at Redis's time and returns the replicas live
// now (this one included) and the epoch. Two round trips: TIME, then one
// MULTI that adds id, trims the replicas past ttl, sets the epoch if it is
// missing (a Redis that lost its data), and reads both back.
func (p *Presence) Beat(ctx context.Context, id string) (int, string, error) {
	now, err := p.client.Time(ctx).Result()
	if err != nil {
		return 0, "", fmt.Errorf("redisstore: presence: %w", err)
	}
	ms := now.UnixMilli()
	var live *redis.IntCmd
	var epoch *redis.StringCmd
	_, err = p.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZAdd(ctx, p.key, redis.Z{Score: float64(ms), Member: id})
		pipe.ZRemRangeByScore(ctx, p.key, "-inf", "("+strconv.FormatInt(ms-p.ttl.Milliseconds(), 10))
		pipe.PExpire(ctx, p.key, p.ttl)
		pipe.SetNX(ctx, p.epochKey, id+":"+strconv.FormatInt(now.UnixMicro(), 10), epochTTL)
		pipe.PExpire(ctx, p.epochKey, epochTTL)
		epoch = pipe.Get(ctx, p.epochKey)
		live = pipe.ZCard(ctx, p.key)
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("redisstore: presence: %w", err)
	}
	return int(live.Val()), epoch.Val(), nil
}

// Leave removes id at once.
func (p *Presence) Leave(ctx context.Context, id string) error {
	if err := p.client.ZRem(ctx, p.key, id).Err(); err != nil {
		return fmt.Errorf("redisstore: presence: %w", err)
	}
	return nil
}

// NotRun reports whether err, from Take, says Redis certainly ran nothing
// (no connection, an open breaker, a redirect or state it refused before
// running), for every slot group of a Cluster batch that failed: the only
// failures after which hits decided elsewhere are not already counted.
func NotRun(err error) bool {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			if !NotRun(e) {
				return false
			}
		}
		return true
	}
	switch classify(err) {
	case notRun, shed:
		return true
	}
	return false
}
