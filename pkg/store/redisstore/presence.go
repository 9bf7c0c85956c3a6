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
// of their last beat (one ZADD and a trim per beat), another of those
// still deciding counters locally, and an epoch key set once and kept
// while Redis keeps its data. All share the key's hash tag: one Cluster
// slot, so one MULTI per beat.
type Presence struct {
	client                  redis.UniversalClient
	key, localKey, epochKey string
	ttl                     time.Duration
}

// Presence returns the presence under key (which should carry a hash tag
// of its own, e.g. "{ratelimitd}:replicas"), where a replica counts as live
// for ttl after its last beat.
func (s *Store) Presence(key string, ttl time.Duration) *Presence {
	return &Presence{client: s.client, key: key, localKey: key + ":local", epochKey: key + ":epoch", ttl: ttl}
}

// Beat is what one beat says, this replica included.
type Beat struct {
	// Live replicas, and those of them still local.
	Live, Local int
	// Oldest is the last beat of the live replica that beat longest ago,
	// Now this beat's: Redis's time.
	Oldest, Now time.Time
	// Epoch is set once and changes only when Redis lost its data.
	Epoch string
}

// Beat records id as live at Redis's time, and as local or not. Two round
// trips: TIME, then one MULTI that adds id to one set and to or from the
// other, trims both of beats older than ttl, sets the epoch if it is
// missing (a Redis that lost its data), and reads back.
func (p *Presence) Beat(ctx context.Context, id string, local bool) (Beat, error) {
	now, err := p.client.Time(ctx).Result()
	if err != nil {
		return Beat{}, fmt.Errorf("redisstore: presence: %w", err)
	}
	ms := now.UnixMilli()
	old := "(" + strconv.FormatInt(ms-p.ttl.Milliseconds(), 10)
	var live, stillLocal *redis.IntCmd
	var oldest *redis.ZSliceCmd
	var epoch *redis.StringCmd
	_, err = p.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, k := range []string{p.key, p.localKey} {
			if k == p.key || local {
				pipe.ZAdd(ctx, k, redis.Z{Score: float64(ms), Member: id})
			} else {
				pipe.ZRem(ctx, k, id)
			}
			pipe.ZRemRangeByScore(ctx, k, "-inf", old)
			pipe.PExpire(ctx, k, p.ttl)
		}
		pipe.SetNX(ctx, p.epochKey, id+":"+strconv.FormatInt(now.UnixMicro(), 10), epochTTL)
		pipe.PExpire(ctx, p.epochKey, epochTTL)
		epoch = pipe.Get(ctx, p.epochKey)
		live, stillLocal = pipe.ZCard(ctx, p.key), pipe.ZCard(ctx, p.localKey)
		oldest = pipe.ZRangeWithScores(ctx, p.key, 0, 0)
		return nil
	})
	if err != nil {
		return Beat{}, fmt.Errorf("redisstore: presence: %w", err)
	}
	b := Beat{Live: int(live.Val()), Local: int(stillLocal.Val()), Now: time.UnixMilli(ms), Epoch: epoch.Val()}
	if z := oldest.Val(); len(z) > 0 {
		b.Oldest = time.UnixMilli(int64(z[0].Score))
	}
	return b, nil
}

// Leave removes id at once.
func (p *Presence) Leave(ctx context.Context, id string) error {
	_, err := p.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZRem(ctx, p.key, id)
		pipe.ZRem(ctx, p.localKey, id)
		return nil
	})
	if err != nil {
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
