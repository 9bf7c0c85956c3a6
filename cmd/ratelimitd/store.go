package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/internal/redisconn"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// newStore builds the backend's store (with Redis, the lease gate over
// it: leaseGate, on once a rule leases), then the local over-limit cache
// (LOCAL_CACHE_SIZE_IN_BYTES) over either, so a request the cache knows to
// be denied reaches neither; its gauges go to envoy's stats. It returns
// the gate too (nil on the embedded store, which never leases).
func newStore(set settings, m *metrics.Metrics, envoy *envoyStats, log *zap.Logger) (store.Store, *leaseGate, error) {
	st, gate, err := set.backend().newStore(m, log)
	if err != nil {
		return nil, nil, err
	}
	if set.LocalCacheBytes == 0 {
		return st, gate, nil
	}
	cache := localcache.New(st, set.LocalCacheBytes, localCacheOptions(set, st)...)
	if err := m.AddLocalCache(cache); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("local cache metrics: %w", err), st.Close())
	}
	envoy.addLocalCache(cache)
	return cache, gate, nil
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

// localCacheOptions are LOCAL_CACHE_MAX_AGE and, on Redis, the refunds
// other replicas publish (redisstore's WatchRefunds, found under the
// decorators), which drop this replica's cached denials.
func localCacheOptions(set settings, st store.Store) []localcache.Option {
	opts := []localcache.Option{localcache.WithMaxAge(set.LocalCacheMaxAge)}
	for st != nil {
		if w, ok := st.(interface {
			WatchRefunds(ctx context.Context, drop func(...string), flush func()) error
		}); ok {
			return append(opts, localcache.WithInvalidations(w.WatchRefunds))
		}
		u, ok := st.(interface{ Unwrap() store.Store })
		if !ok {
			break
		}
		st = u.Unwrap()
	}
	return opts
}
