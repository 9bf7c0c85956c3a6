package daemon

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/service"
)

// newServers builds the gRPC server with its services and the HTTP, debug
// and Prometheus servers.
func (a *app) newServers(m *metrics.Metrics, tracingOpts []grpc.ServerOption) error {
	grpcOpts, err := a.grpcOptions(tracingOpts)
	if err != nil {
		return err
	}
	a.grpc = grpc.NewServer(grpcOpts...)
	if err := a.registerGRPC(m); err != nil {
		return err
	}
	mux := http.NewServeMux()
	a.svc.RegisterHTTP(mux)
	a.http = newHTTPServer(mux)
	dbg := debugMux(a.watcher, m.Handler(), a.set.DebugPprof)
	if a.admin != nil {
		a.admin.RegisterHTTP(dbg)
	}
	a.debug = newHTTPServer(dbg)
	a.prom = promServer(a.set, a.envoy.handler(m))
	return nil
}

// registerGRPC puts every service on the gRPC server, one line each: the
// rate-limit service, and the quota service, the counters API and the delay
// queue when their settings turn them on; health and reflection (which
// lists them all) come last.
func (a *app) registerGRPC(m *metrics.Metrics) error {
	var err error
	a.svc.RegisterGRPC(a.grpc)
	if err = a.startRLQS(m); err != nil {
		return err
	}
	if err = a.startAdmin(m); err != nil {
		return err
	}
	if a.queue, err = newDelayQueue(a.set, m, a.log, a.grpc); err != nil {
		return err
	}
	a.health = health.NewServer()
	healthpb.RegisterHealthServer(a.grpc, a.health)
	a.syncHealth()
	reflection.Register(a.grpc)
	return nil
}

// grpcOptions are the gRPC server's bounds, keepalive, workers, tracing
// and TLS.
func (a *app) grpcOptions(tracingOpts []grpc.ServerOption) ([]grpc.ServerOption, error) {
	set := a.set
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(service.RecoverUnary(a.log)),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      set.GRPCMaxConnectionAge,
			MaxConnectionAgeGrace: set.GRPCMaxConnectionAgeGrace,
		}),
	}
	if set.GRPCMaxStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(set.GRPCMaxStreams)))
	}
	opts = append(opts, a.svc.GRPCServerOptions()...)
	opts = append(opts, a.envoy.grpcOptions()...)
	if set.GRPCMaxRecvBytes > 0 {
		opts = append(opts, grpc.MaxRecvMsgSize(set.GRPCMaxRecvBytes))
	}
	// Long-lived stream workers keep their grown stacks: a fresh goroutine
	// per call re-grew its stack on every call (about a tenth of the CPU
	// under load, see docs/performance.md).
	opts = append(opts, grpc.NumStreamWorkers(uint32(max(128, 16*runtime.GOMAXPROCS(0)))))
	opts = append(opts, tracingOpts...)
	if set.GRPCTLS {
		tlsCfg, err := grpcServerTLS(set, a.log)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	return opts, nil
}

// syncHealth makes gRPC health agree with /healthcheck: NOT_SERVING while
// no (or, with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, an empty) config is
// in force. The watcher calls it after every reload.
func (a *app) syncHealth() {
	if a.health == nil {
		return
	}
	status := healthpb.HealthCheckResponse_NOT_SERVING
	if a.svc.Healthy() {
		status = healthpb.HealthCheckResponse_SERVING
	}
	a.health.SetServingStatus("", status)
	a.health.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, status)
}

// newHTTPServer bounds how long a client may take to send a request; there
// is no write timeout because /debug/pprof/profile streams for its duration.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// listen binds every listener before anything is served, so a port
// conflict fails the start instead of leaving a half-running process.
func (a *app) listen() error {
	var err error
	if a.grpcLn, err = net.Listen("tcp", a.set.GRPCAddr); err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	a.grpcLn = yieldingListener{a.grpcLn}
	if a.httpLn, err = net.Listen("tcp", a.set.HTTPAddr); err != nil {
		return fmt.Errorf("HTTP listener: %w", err)
	}
	if a.debugLn, err = net.Listen("tcp", a.set.DebugAddr); err != nil {
		return fmt.Errorf("debug listener: %w", err)
	}
	if a.prom != nil {
		if a.promLn, err = net.Listen("tcp", a.set.Prometheus.Addr); err != nil {
			return fmt.Errorf("PROMETHEUS_ADDR listener: %w", err)
		}
	}
	return nil
}

// announce logs, once, exactly what is listening and with which backend.
func (a *app) announce(log *zap.Logger) {
	fields := []zap.Field{
		zap.String("grpc", a.grpcLn.Addr().String()),
		zap.String("http", a.httpLn.Addr().String()+" (/healthcheck, /json)"),
		zap.String("debug", a.debugLn.Addr().String()+debugEndpoints(a.set.DebugPprof, a.set.Admin.Token != nil)),
		zap.Stringer("backend", a.set.Backend),
		zap.String("config", a.configDescription()),
	}
	if a.promLn != nil {
		fields = append(fields, zap.String("prometheus", a.promLn.Addr().String()+" ("+a.set.Prometheus.Path+")"))
	}
	fields = append(fields, a.set.backend().logFields()...)
	log.Info("ratelimitd listening", fields...)
}
