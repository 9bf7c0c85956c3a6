package envoystats

import (
	"fmt"
	"sync/atomic"
	"time"

	gostats "github.com/lyft/gostats"
	"go.uber.org/zap"
)

// NewStatsd is envoyproxy's USE_STATSD sink: gostats' network sink writing
// statsd lines (name:value|c, |g, |ms) to host:port over protocol ("tcp",
// gostats' and so envoyproxy's default, or "udp"). Writes go to a buffer
// that a goroutine of the sink sends: a missing or slow statsd agent never
// blocks a caller, it only drops stats once the buffer (4 MiB) is full.
// log receives the sink's errors (an unreachable agent, dropped bytes), at
// most one line a minute.
func NewStatsd(host string, port int, protocol string, log *zap.Logger) (sink gostats.Sink, err error) {
	// gostats reads its defaults from the environment first and panics on a
	// malformed GOSTATS_* or STATSD_* variable: report it instead.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("statsd sink: %v", p)
		}
	}()
	net := gostats.NewNetSink(
		gostats.WithStatsdHost(host),
		gostats.WithStatsdPort(port),
		gostats.WithStatsdProtocol(protocol),
		gostats.WithLogger(newRareLogger(log.With(zap.String("statsd", fmt.Sprintf("%s://%s:%d", protocol, host, port))), time.Minute)),
	)
	return &statsdSink{FlushableSink: net}, nil
}

// statsdSink makes gostats' Flush, which waits for the network, happen in
// the background: the sink's own goroutine sends its buffer every second
// anyway, so a flush never needs to wait for an agent that may be gone.
type statsdSink struct {
	gostats.FlushableSink
	flushing atomic.Bool
}

func (s *statsdSink) Flush() {
	if !s.flushing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.flushing.Store(false)
		s.FlushableSink.Flush()
	}()
}

// close sends what is buffered, waiting a little for the agent (a local
// one answers at once; an unreachable one is not worth a slow shutdown).
func (s *statsdSink) close() {
	done := make(chan struct{})
	go func() {
		s.FlushableSink.Flush()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(250 * time.Millisecond):
	}
}

// rareLogger is gostats' Logger on zap, at most one line per interval: an
// agent that is down would otherwise log every retry and every dropped
// buffer.
type rareLogger struct {
	log   *zap.SugaredLogger
	every time.Duration
	next  atomic.Int64 // unix nanoseconds before which lines are dropped
}

func newRareLogger(log *zap.Logger, every time.Duration) *rareLogger {
	return &rareLogger{log: log.Sugar(), every: every}
}

func (l *rareLogger) allow() bool {
	now := time.Now().UnixNano()
	next := l.next.Load()
	return now >= next && l.next.CompareAndSwap(next, now+int64(l.every))
}

func (l *rareLogger) Warnf(format string, args ...any) {
	if l.allow() {
		l.log.Warnf("statsd sink: "+format+" (stats are dropped while the agent is unreachable; USE_STATSD=false turns statsd off)", args...)
	}
}

func (l *rareLogger) Errorf(format string, args ...any) {
	if l.allow() {
		l.log.Errorf("statsd sink: "+format, args...)
	}
}
