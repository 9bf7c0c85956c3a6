package daemon

import (
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zapgrpc"
	"google.golang.org/grpc/grpclog"
)

// routeLibraryLogs sends what libraries log through log, so that LOG_LEVEL
// and LOG_FORMAT (and the redactor) hold for every line the process writes,
// from the first (envoyproxy's #1192): the standard library's log (which
// OpenTelemetry's SDK reports failed exports with, as plain text), the
// OpenTelemetry error handler, and gRPC's grpclog, errors only as gRPC's
// own default. Each says at most one line a second. It returns what gives
// the standard library's log its output back.
func routeLibraryLogs(log *zap.Logger) (restore func()) {
	sampled := log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
	restore, err := zap.RedirectStdLogAt(sampled.Named("stdlog"), zapcore.WarnLevel)
	if err != nil {
		restore = func() {}
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		sampled.Warn("opentelemetry", zap.Error(err))
	}))
	grpcLogs.cur.Store(zapgrpc.NewLogger(sampled.Named("grpc").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel))))
	// grpclog's logger is set once, before gRPC logs anything; a later Run
	// (tests) only swaps the logger it forwards to.
	grpcLogOnce.Do(func() { grpclog.SetLoggerV2(grpcLogs) })
	return restore
}

var (
	grpcLogs    = &grpcLog{}
	grpcLogOnce sync.Once
)

// grpcLog is a grpclog.LoggerV2 forwarding to the latest Run's logger.
type grpcLog struct {
	cur atomic.Pointer[zapgrpc.Logger]
}

var _ grpclog.LoggerV2 = (*grpcLog)(nil)

func (g *grpcLog) Info(args ...any)                    { g.cur.Load().Info(args...) }
func (g *grpcLog) Infoln(args ...any)                  { g.cur.Load().Infoln(args...) }
func (g *grpcLog) Infof(format string, args ...any)    { g.cur.Load().Infof(format, args...) }
func (g *grpcLog) Warning(args ...any)                 { g.cur.Load().Warning(args...) }
func (g *grpcLog) Warningln(args ...any)               { g.cur.Load().Warningln(args...) }
func (g *grpcLog) Warningf(format string, args ...any) { g.cur.Load().Warningf(format, args...) }
func (g *grpcLog) Error(args ...any)                   { g.cur.Load().Error(args...) }
func (g *grpcLog) Errorln(args ...any)                 { g.cur.Load().Errorln(args...) }
func (g *grpcLog) Errorf(format string, args ...any)   { g.cur.Load().Errorf(format, args...) }
func (g *grpcLog) Fatal(args ...any)                   { g.cur.Load().Fatal(args...) }
func (g *grpcLog) Fatalln(args ...any)                 { g.cur.Load().Fatalln(args...) }
func (g *grpcLog) Fatalf(format string, args ...any)   { g.cur.Load().Fatalf(format, args...) }
func (g *grpcLog) V(l int) bool                        { return g.cur.Load().V(l) }
