package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/config"
	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/redisconn"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/stack"
)

// newStore builds the limiter's store with pkg/store/stack, as an embedder
// would (stack.New's order; the fallback's metrics per rule of rules, the
// cache's gauges to envoy's stats too), and the lease gate over Redis (nil
// on the embedded store, which never leases).
func newStore(set settings, m *metrics.Metrics, envoy *envoyStats, log *zap.Logger, tp trace.TracerProvider, rules func() *config.Config) (*stack.Stack, *leaseGate, error) {
	opts, err := set.backend().stackOptions(m, log)
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, stack.WithLocalCache(set.LocalCacheBytes, localcache.WithMaxAge(set.LocalCacheMaxAge)),
		fallbackOption(set, m, rules))
	if tp != nil {
		opts = append(opts, stack.WithTracing(tp))
	}
	stk, err := stack.New(opts...)
	if err != nil {
		return nil, nil, err
	}
	if err := addStackMetrics(m, envoy, stk); err != nil {
		return nil, nil, errors.Join(err, stk.Close())
	}
	var gate *leaseGate
	if stk.Lease != nil {
		gate = &leaseGate{Store: stk.Lease, log: log}
	}
	return stk, gate, nil
}

// addStackMetrics exports the statistics of the stack's layers, the local
// cache's to envoyproxy's stats too (ratelimit.localcache.*).
func addStackMetrics(m *metrics.Metrics, envoy *envoyStats, stk *stack.Stack) error {
	if stk.Memory != nil {
		if err := m.AddMemStore(stk.Memory); err != nil {
			return fmt.Errorf("memstore metrics: %w", err)
		}
	}
	if stk.Lease != nil {
		if err := m.AddLeases(stk.Lease); err != nil {
			return fmt.Errorf("lease metrics: %w", err)
		}
	}
	if stk.Cache != nil {
		if err := m.AddLocalCache(stk.Cache); err != nil {
			return fmt.Errorf("local cache metrics: %w", err)
		}
		envoy.addLocalCache(stk.Cache)
	}
	if stk.Fallback != nil {
		if err := m.AddFallback(stk.Fallback); err != nil {
			return fmt.Errorf("on_store_error: local metrics: %w", err)
		}
	}
	return nil
}

// redisConnection is how every client of ours reaches Redis (the limiter's
// store and the delay queue): REDIS_URL, REDIS_TYPE, REDIS_SOCKET_TYPE,
// REDIS_AUTH, REDIS_POOL_SIZE, REDIS_TIMEOUT, REDIS_TLS* and REDIS_BREAKER_*.
// The queue's client is built from it directly; the store's from
// redisStoreConnection's options, which carry the same values.
func redisConnection(set settings) (redisconn.Config, error) {
	c := redisconn.Config{
		Addr:                 set.RedisURL,
		Type:                 set.RedisType,
		SocketType:           set.RedisSocketType,
		Auth:                 set.RedisAuth,
		PoolSize:             set.RedisPoolSize,
		Timeout:              set.RedisTimeout,
		BreakerThreshold:     set.RedisBreakerThreshold,
		BreakerProbeInterval: set.RedisBreakerProbeInterval,
	}
	if set.RedisTLS {
		cfg, err := redisTLS(set)
		if err != nil {
			return redisconn.Config{}, err
		}
		c.TLS = cfg
	}
	return c, nil
}

// redisStoreConnection is redisConnection as the store's options.
func redisStoreConnection(set settings) ([]redisstore.Option, error) {
	c, err := redisConnection(set)
	if err != nil {
		return nil, err
	}
	opts := []redisstore.Option{
		redisstore.WithAddr(c.Addr),
		redisstore.WithType(c.Type),
		redisstore.WithSocketType(c.SocketType),
		redisstore.WithAuth(c.Auth),
		redisstore.WithPoolSize(c.PoolSize),
		redisstore.WithTimeout(c.Timeout),
		redisstore.WithBreaker(c.BreakerThreshold, c.BreakerProbeInterval),
	}
	if c.TLS != nil {
		opts = append(opts, redisstore.WithTLS(c.TLS))
	}
	return opts, nil
}

// redisTLS builds REDIS_TLS's client config from envoyproxy's settings: the
// system roots unless REDIS_TLS_CACERT names a bundle, and a client
// certificate when one is given.
func redisTLS(set settings) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if set.RedisTLSCACert != "" {
		pool, err := certPool(set.RedisTLSCACert)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CACERT: %w", err)
		}
		cfg.RootCAs = pool
	}
	if set.RedisTLSClientCert != "" {
		cert, err := tls.LoadX509KeyPair(set.RedisTLSClientCert, set.RedisTLSClientKey)
		if err != nil {
			return nil, fmt.Errorf("REDIS_TLS_CLIENT_CERT/REDIS_TLS_CLIENT_KEY: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	// Like envoyproxy: the chain is still verified, only the host name is
	// not, for Redis endpoints reached by an address the certificate lacks.
	if set.RedisTLSSkipVerifyHost {
		cfg.InsecureSkipVerify = true
		roots := cfg.RootCAs
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("redis TLS: no server certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// defaultLocalCacheMaxAge is LOCAL_CACHE_MAX_AGE's default: a replica that
// misses a refund's invalidation answers the lifted denial from its cache
// for at most this long.
const defaultLocalCacheMaxAge = time.Second
