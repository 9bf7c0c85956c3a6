package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/ratelimitd/ratelimitd/internal/admin"
	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/tracing"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// configWatcher is what serve needs of *config.Watcher or, with
// CONFIG_TYPE=GRPC_XDS_SOTW, *xdsconfig.Source.
type configWatcher interface {
	Current() *config.Config
	Run(ctx context.Context) error
	Reload() error
}

// app is one ratelimitd: built by newApp, bound by listen, run by serve.
type app struct {
	set     settings
	log     *zap.Logger
	watcher configWatcher
	store   store.Store
	svc     *service.Service
	health  *health.Server
	grpc    *grpc.Server
	http    *http.Server
	debug   *http.Server
	// prom serves /metrics on PROMETHEUS_ADDR; nil unless USE_PROMETHEUS.
	prom   *http.Server
	promLn net.Listener
	// tracing exports spans; nil unless TRACING_ENABLED.
	tracing *tracing.Provider
	// envoy is envoyproxy's stats (statsd, Prometheus); nil when off.
	envoy *envoyStats
	queue *delayQueue
	// admin serves the counters API; nil unless a credential is configured.
	admin *admin.Server
	// leases is the lease gate over the Redis store; nil on the embedded
	// store, which never leases.
	leases *leaseGate
	// rlqs is the Rate Limit Quota Service (rlqs.go); nil unless RLQS_ENABLED.
	rlqs *rlqs.Server

	grpcLn, httpLn, debugLn net.Listener

	// stopWatch and watchDone are set once the watcher runs (startWatch).
	stopWatch context.CancelFunc
	watchDone chan error
}

// newApp builds every part of the service, binding nothing: the config
// source, the store, the service and the servers around it.
func newApp(set settings, log *zap.Logger) (_ *app, err error) {
	a := &app{set: set, log: log}
	// One cleanup path: whatever a failed step leaves built is released.
	defer func() {
		if err != nil {
			err = errors.Join(err, a.release())
		}
	}()
	if a.envoy, err = newEnvoyStats(set, log); err != nil {
		return nil, err
	}
	m := metrics.New(metrics.WithNearLimitRatio(set.NearLimitRatio), metrics.WithMaxDetailedSeries(set.MaxDetailedSeries), a.envoy.metricsOption())
	if a.watcher, err = a.newConfigSource(m); err != nil {
		return nil, err
	}
	if err := m.WatchRules(a.watcher.Current); err != nil {
		return nil, err
	}
	if a.store, a.leases, err = newStore(set, m, log); err != nil {
		return nil, err
	}
	a.observeLeases(a.watcher.Current())
	var tracingOpts []grpc.ServerOption
	if a.store, tracingOpts, err = a.startTracing(a.store); err != nil {
		return nil, err
	}
	if a.svc, err = newService(set, a.watcher, a.store, m, log); err != nil {
		return nil, err
	}
	if err := a.newServers(m, tracingOpts); err != nil {
		return nil, err
	}
	return a, nil
}

// release frees what newApp built when a later step failed: the delay
// queue's client, the store's, and the tracer's exporter.
func (a *app) release() error {
	var errs []error
	if a.queue != nil {
		errs = append(errs, a.queue.close())
	}
	if a.store != nil {
		errs = append(errs, a.store.Close())
	}
	a.envoy.close()
	return errors.Join(append(errs, a.stopTracing())...)
}

// newConfigSource builds the watcher of the config files, or the xDS source
// with CONFIG_TYPE=GRPC_XDS_SOTW, counting each load in m and keeping health
// in step with the config in force.
func (a *app) newConfigSource(m *metrics.Metrics) (configWatcher, error) {
	set, log := a.set, a.log
	empty := newEmptyConfigAlarm(m.Registry(), log, set.ConfigDir)
	onReload := func(cfg *config.Config, err error) {
		m.ConfigLoad(err)
		if err == nil {
			empty.observe(cfg)
			a.observeLeases(cfg)
		}
		a.syncHealth()
	}
	var (
		w   configWatcher
		err error
	)
	if set.XDS.Enabled {
		w, err = newXDSSource(set, log, onReload)
	} else {
		w, err = config.NewWatcher(set.ConfigDir,
			config.WithWatchPath(set.WatchPath),
			config.WithLoadOptions(
				config.WithMergeDomains(set.MergeDomains),
				config.WithIgnoreDotfiles(set.IgnoreDotfiles),
			),
			config.WithLogger(log),
			config.WithStartWithoutConfig(set.ForceStartWithoutConfig),
			config.WithOnReload(onReload),
		)
	}
	if err != nil {
		m.ConfigLoad(err)
		// Both sources' errors say what failed to load and name the
		// directory, file or xDS server; another prefix repeated them (and
		// named the directory for an xDS source that reads none).
		return nil, err
	}
	// The files were read just now; an xDS source has loaded nothing yet
	// and counts each response as it comes.
	switch {
	case set.XDS.Enabled:
	case w.Current() != nil:
		m.ConfigLoad(nil)
		empty.observe(w.Current())
	default:
		m.ConfigLoad(errors.New("no valid initial config"))
	}
	return w, nil
}

// newService is pkg/service's Service with the daemon's settings, config
// source and metrics: the daemon decides exactly as a Go program embedding
// that package does.
func newService(set settings, w configWatcher, st store.Store, m *metrics.Metrics, log *zap.Logger) (*service.Service, error) {
	return service.New(nil, st,
		service.WithConfigSource(w),
		service.WithKeyPrefix(set.CacheKeyPrefix),
		service.WithLimits(set.MaxDescriptors, set.MaxEntries, set.MaxValueLen),
		service.WithShadowMode(set.ShadowMode),
		service.WithHeaders(set.Headers),
		service.WithObserver(m),
		service.WithHealthyNeedsDomain(set.HealthyWithAtLeastOneConfig),
		service.WithDynamicMetadata(set.DynamicMetadata),
		service.WithQuotaMode(set.QuotaMode),
		service.WithLease(set.Lease.Enabled),
		service.WithLogger(log),
		service.WithDecodeBudget(int64(set.MaxDecodingBytes)),
	)
}

// newServers builds the gRPC server (the service, the delay queue, health,
// reflection) and the HTTP, debug and Prometheus servers.
func (a *app) newServers(m *metrics.Metrics, tracingOpts []grpc.ServerOption) error {
	grpcOpts, err := a.grpcOptions(tracingOpts)
	if err != nil {
		return err
	}
	a.grpc = grpc.NewServer(grpcOpts...)
	a.svc.RegisterGRPC(a.grpc)
	if err := a.startRLQS(m); err != nil {
		return err
	}
	if err := a.startAdmin(m); err != nil {
		return err
	}
	if a.queue, err = newDelayQueue(a.set, m, a.grpc); err != nil {
		return err
	}
	a.health = health.NewServer()
	healthpb.RegisterHealthServer(a.grpc, a.health)
	a.syncHealth()
	reflection.Register(a.grpc)

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
		grpc.MaxConcurrentStreams(uint32(set.GRPCMaxStreams)),
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

// startWatch runs the watcher once, whether awaitConfig or serve asks first.
func (a *app) startWatch() {
	if a.watchDone != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stopWatch, a.watchDone = stop, make(chan error, 1)
	go func() { a.watchDone <- a.watcher.Run(ctx) }()
}

// abort releases what newApp and a failed listen acquired.
func (a *app) abort(cause error) error {
	if a.watchDone != nil {
		a.stopWatch()
		<-a.watchDone
	}
	for _, ln := range []net.Listener{a.grpcLn, a.httpLn, a.debugLn, a.promLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	if err := errors.Join(a.queue.close(), a.store.Close()); err != nil {
		cause = errors.Join(cause, fmt.Errorf("closing store: %w", err))
	}
	if err := a.stopTracing(); err != nil {
		cause = errors.Join(cause, err)
	}
	a.envoy.close()
	return cause
}

// serve runs until ctx ends or a server fails, reloading the config on each
// hup, then shuts down gracefully within the shutdown timeout.
func (a *app) serve(ctx context.Context, hup <-chan os.Signal) error {
	errc := make(chan error, 4)
	go func() { errc <- serveErr("gRPC", a.grpc.Serve(a.grpcLn)) }()
	go func() { errc <- serveErr("HTTP", a.http.Serve(a.httpLn)) }()
	go func() { errc <- serveErr("debug", a.debug.Serve(a.debugLn)) }()
	if a.prom != nil {
		go func() { errc <- serveErr("prometheus", a.prom.Serve(a.promLn)) }()
	}

	a.startWatch()
	stopWatch, watchDone := a.stopWatch, a.watchDone
	defer stopWatch()

	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			runErr = err
			break loop
		case err := <-watchDone:
			watchDone = nil
			if err != nil && !errors.Is(err, context.Canceled) {
				runErr = fmt.Errorf("config watcher: %w", err)
				break loop
			}
		case <-hup:
			// The watcher logs the outcome either way.
			_ = a.watcher.Reload()
		}
	}

	a.log.Info("shutting down", zap.Duration("timeout", a.set.ShutdownTimeout))
	deadline := time.Now().Add(a.set.ShutdownTimeout)
	a.svc.SetServing(false)
	a.health.Shutdown()
	a.queue.shutdown()
	a.stopRLQS()
	a.shutdownServers()
	stopWatch()
	if watchDone != nil {
		<-watchDone
	}
	// Every call has ended: give the leases' unused hits back while Redis
	// is still open, within what is left of the shutdown timeout.
	a.returnLeases(deadline)
	if err := a.store.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("closing store: %w", err))
	}
	if err := a.stopTracing(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	// Every call has ended: send the stats they left.
	a.envoy.close()
	runErr = errors.Join(runErr, a.queue.close())
	return runErr
}

// shutdownServers stops every server in parallel, letting in-flight
// calls finish until the shutdown timeout, then cutting them off.
func (a *app) shutdownServers() {
	ctx, cancel := context.WithTimeout(context.Background(), a.set.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		done := make(chan struct{})
		go func() {
			a.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			a.grpc.Stop()
			<-done
		}
	})
	for _, srv := range []*http.Server{a.http, a.debug, a.prom} {
		if srv == nil {
			continue
		}
		wg.Go(func() {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
			}
		})
	}
	wg.Wait()
}

func serveErr(name string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return fmt.Errorf("%s server: %w", name, err)
}
