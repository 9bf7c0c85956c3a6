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

// Clients opens a client on each of servers, closed when t ends.
func Clients(t testing.TB, servers []*Server) []*redis.Client {
	t.Helper()
	out := make([]*redis.Client, len(servers))
	for i, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}
