package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// redisLogger sends go-redis's own messages (dial failures, pool events)
// through zap, sampled like the service's backend errors: a dead Redis
// must not print a line per connection attempt.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...))
}

// newRedisLogger keeps the first of each distinct message per second.
func newRedisLogger(log *zap.Logger) redisLogger {
	return redisLogger{log: log.Named("go-redis").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))}
}

// routeRedisLogs installs redisLogger. go-redis keeps one package-level
// logger, so Run calls this once, and only for the Redis backend.
func routeRedisLogs(log *zap.Logger) {
	redis.SetLogger(newRedisLogger(log))
}
