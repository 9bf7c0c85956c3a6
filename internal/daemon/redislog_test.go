package daemon

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// stoppedClock pins entry times, which is what zap's sampler ticks on.
type stoppedClock struct{ t time.Time }

func (c stoppedClock) Now() time.Time                       { return c.t }
func (stoppedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

func TestRedisLoggerIsStructuredAndSampled(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := newRedisLogger(zap.New(core, zap.WithClock(stoppedClock{time.Unix(1e9, 0)})))
	ctx := context.Background()
	for range 100 { // a dead Redis: the same dial error on every attempt
		l.Printf(ctx, "redis: dial %s: %s", "10.0.0.1:6379", "connection refused")
	}
	l.Printf(ctx, "redis: pool %d closed", 3)

	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("%d lines for 100 identical messages and one other, want 2: %v", len(got), got)
	}
	for i, want := range []string{"redis: dial 10.0.0.1:6379: connection refused", "redis: pool 3 closed"} {
		if got[i].Message != want || got[i].LoggerName != "go-redis" || got[i].Level != zapcore.WarnLevel {
			t.Errorf("line %d = %q (logger %q, %v), want %q from go-redis at warn", i, got[i].Message, got[i].LoggerName, got[i].Level, want)
		}
	}
}
