package redistest

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
)

// CommandStats is c's INFO commandstats, by command (redisinfo.CommandStats).
func CommandStats(t testing.TB, c *redis.Client) map[string]redisinfo.CommandStat {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	return redisinfo.CommandStats(info)
}

// InfoInt is one integer field of c's INFO section.
func InfoInt(t testing.TB, c *redis.Client, section, field string) int {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	v, ok := redisinfo.Field(info, field)
	if !ok {
		t.Fatalf("INFO %s has no %s", section, field)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("INFO %s %s=%q: %v", section, field, v, err)
	}
	return n
}
