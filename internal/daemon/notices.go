package daemon

import (
	"fmt"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
)

// noticeFailures is what the Redis store tells of a local cache notice it
// could not publish or a subscription that failed: counted, and logged at
// most once a minute for each (a Redis down for a while fails them all).
func noticeFailures(m *metrics.Metrics, log *zap.Logger) (func(op string, err error), error) {
	count, err := m.AddNoticeErrors()
	if err != nil {
		return nil, fmt.Errorf("local cache notice metrics: %w", err)
	}
	rare := log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Minute, 1, 0)
	}))
	return func(op string, err error) {
		count(op)
		msg := "local cache notice not published; other replicas may answer a lifted denial from their cache up to LOCAL_CACHE_MAX_AGE"
		if op == "subscribe" {
			msg = "local cache notices' subscription failed (made again); this replica may answer a lifted denial from its cache up to LOCAL_CACHE_MAX_AGE"
		}
		rare.Warn(msg, zap.Error(err))
	}, nil
}
