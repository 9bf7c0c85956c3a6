package scripts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// ReadState is the state key holds in Redis for an op under lim at now, as
// the take script reads it: a register string (lua/registers.lua), a
// counter's integer (lua/counter.lua; the window it counts is the one
// current at now when its tag says so), or a log's sorted set
// (lua/sliding_log.lua). An absent key, a value of another layout and a key
// of another type read as the fresh State. It is for tools and tests
// (storetest's exact case compares it with the reference's).
func ReadState(ctx context.Context, rdb redis.Cmdable, key string, lim algorithms.Limit, now time.Time) (algorithms.State, error) {
	if lim.Algorithm.Info().Log {
		zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil && !isWrongType(err) {
			return algorithms.State{}, fmt.Errorf("read %s: %w", key, err)
		}
		return parseLog(zs), nil
	}
	v, err := rdb.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil), isWrongType(err):
		return algorithms.State{}, nil
	case err != nil:
		return algorithms.State{}, fmt.Errorf("read %s: %w", key, err)
	case lim.Algorithm.Info().Counter:
		st, _ := unpackCounterAt(v, lim, now)
		return st, nil
	}
	st, _ := UnpackRegisters(lim.Algorithm, v)
	return st, nil
}

func isWrongType(err error) bool { return redis.HasErrorPrefix(err, "WRONGTYPE") }

// unpackCounterAt is UnpackCounter for lim's windows, calendar months too.
func unpackCounterAt(v string, lim algorithms.Limit, now time.Time) (algorithms.State, bool) {
	months := calendarMonths(lim)
	if months == 0 {
		return UnpackCounter(v, lim.Period, now)
	}
	n, ok := counterValue(v)
	if !ok {
		return algorithms.State{}, false
	}
	t := now.UTC()
	i := (int64(t.Year())-1970)*12 + int64(t.Month()) - 1
	i -= ((i % months) + months) % months
	start := time.Date(1970, time.Month(i+1), 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, int(months), 0)
	if n%counterTags != counterTag(start.UnixMicro(), 0, months) {
		return algorithms.State{}, true
	}
	return algorithms.StateOf(lim.Algorithm, algorithms.Window{Start: start.UnixMicro(), Count: n / counterTags}, end.UnixMicro()), true
}

// parseLog reads a log's members "at:seq:hits" and its meta member
// "~<sum>" scored ExpiresAt; a set without the meta member reads as fresh,
// as the take script reads it.
func parseLog(zs []redis.Z) algorithms.State {
	var st algorithms.State
	meta := false
	for _, z := range zs {
		m, _ := z.Member.(string)
		if strings.HasPrefix(m, "~") {
			meta, st.ExpiresAt = true, int64(z.Score)
			continue
		}
		parts := strings.Split(m, ":")
		if len(parts) != 3 {
			continue
		}
		var e [3]int64
		for i, s := range parts {
			e[i], _ = strconv.ParseInt(s, 10, 64)
		}
		st.Log = append(st.Log, algorithms.LogEntry{At: e[0], Seq: e[1], Hits: e[2]})
	}
	if !meta {
		return algorithms.State{}
	}
	return st
}
