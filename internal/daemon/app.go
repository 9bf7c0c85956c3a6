package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/ratelimitd/ratelimitd/internal/admin"
	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/rlqs"
	"github.com/ratelimitd/ratelimitd/internal/tracing"
	"github.com/ratelimitd/ratelimitd/pkg/service"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/fallback"
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
	// fallback decides on_store_error: local rules while Redis cannot
	// (fallback.go); nil on the embedded store.
	fallback *fallback.Store

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
	tracingOpts, err := a.startTracing()
	if err != nil {
		return nil, err
	}
	stk, leases, err := newStore(set, m, a.envoy, log, a.tracerProvider(), a.watcher.Current)
	if err != nil {
		return nil, err
	}
	a.store, a.leases, a.fallback = stk.Store, leases, stk.Fallback
	a.observeLeases(a.watcher.Current())
	a.startFallback(a.watcher.Current())
	a.announceTracing()
	if a.svc, err = newService(set, a.watcher, a.store, m, log); err != nil {
		return nil, err
	}
	if err := m.AddAdmission(a.svc); err != nil {
		return nil, err
	}
	if err := a.newServers(m, tracingOpts); err != nil {
		return nil, err
	}
	return a, nil
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
			a.startFallback(cfg)
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
			config.WithLoadOptions(append(set.rulesOptions(), config.WithIgnoreDotfiles(set.IgnoreDotfiles))...),
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
		service.WithConfigSource(rulesOf{w}),
		service.WithKeyPrefix(set.CacheKeyPrefix),
		service.WithLimits(set.MaxDescriptors, set.MaxEntries, set.MaxValueLen),
		service.WithShadowMode(set.ShadowMode),
		service.WithHeaders(set.Headers),
		service.WithMetrics(m.Registerer()),
		service.WithHealthyNeedsDomain(set.HealthyWithAtLeastOneConfig),
		service.WithDynamicMetadata(set.DynamicMetadata),
		service.WithQuotaMode(set.QuotaMode),
		service.WithQuotaGroups(set.QuotaGroups),
		service.WithAdmission(set.Overload.MaxConcurrentRequests, set.Overload.RequestTimeout),
		service.WithLease(set.Lease.Enabled),
		service.WithLogger(log),
		service.WithDecodeBudget(int64(set.MaxDecodingBytes)),
	)
}

// rulesOf is the watcher as the service reads it.
type rulesOf struct{ w configWatcher }

func (r rulesOf) Current() *service.Rules { return (*service.Rules)(r.w.Current()) }

// startWatch runs the watcher once, whether awaitConfig or serve asks first.
func (a *app) startWatch() {
	if a.watchDone != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stopWatch, a.watchDone = stop, make(chan error, 1)
	go func() { a.watchDone <- a.watcher.Run(ctx) }()
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
	watchDone := a.watchDone
	defer a.stopWatch()
	for {
		select {
		case <-ctx.Done():
			return a.shutdown(nil, watchDone)
		case err := <-errc:
			return a.shutdown(err, watchDone)
		case err := <-watchDone:
			watchDone = nil
			if err != nil && !errors.Is(err, context.Canceled) {
				return a.shutdown(fmt.Errorf("config watcher: %w", err), nil)
			}
		case <-hup:
			// The watcher logs the outcome either way.
			_ = a.watcher.Reload()
		}
	}
}
