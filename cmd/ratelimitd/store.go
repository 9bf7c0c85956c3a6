package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/internal/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// newStore builds the backend and the decorators over it, innermost
// first: with Redis the lease gate (leaseGate: on once a rule leases), then
// the local over-limit cache (LOCAL_CACHE_SIZE_IN_BYTES), so a request the
// cache knows to be denied reaches neither. It returns the gate too (nil on
// the embedded store, which never leases: it is one process, with every
// counter in memory already).
func newStore(set settings, m *metrics.Metrics, log *zap.Logger) (store.Store, *leaseGate, error) {
	st, err := newBackend(set, m, log)
	if err != nil {
		return nil, nil, err
	}
	var gate *leaseGate
	// The Redis store is always a Lender (asserted below); the embedded
	// store is one too, but never leases.
	if lender, ok := st.(store.Lender); ok && set.Backend == backendRedis {
		gate = newLeaseGate(lender, set.Lease, log)
		if err := m.AddLeases(gate); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("lease metrics: %w", err), st.Close())
		}
		if set.Lease.Enabled {
			gate.enable()
		}
		st = gate
	}
	if set.LocalCacheBytes == 0 {
		return st, gate, nil
	}
	cache := localcache.New(st, set.LocalCacheBytes)
	if err := m.AddLocalCache(cache); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("local cache metrics: %w", err), st.Close())
	}
	return cache, gate, nil
}

// The Redis store lends blocks of its counters to the lease decorator.
var _ store.Lender = (*redisstore.Store)(nil)

func newBackend(set settings, m *metrics.Metrics, log *zap.Logger) (store.Store, error) {
	if set.Backend != backendRedis {
		st := memstore.New(memstore.WithMaxKeys(set.MemoryMaxKeys))
		if err := m.AddMemStore(st); err != nil {
			return nil, errors.Join(fmt.Errorf("memstore metrics: %w", err), st.Close())
		}
		return st, nil
	}
	opts, err := redisConnection(set)
	if err != nil {
		return nil, err
	}
	breakers := redisstore.NewBreakerSet()
	if err := watchBreakers(m, "limiter", breakers); err != nil {
		return nil, fmt.Errorf("redis breaker metrics: %w", err)
	}
	opts = append(opts,
		redisstore.WithBreakerSet(breakers),
		redisstore.WithPipeline(set.RedisPipelineWindow, set.RedisPipelineLimit),
		redisstore.WithRoundTripObserver(m.RoundTrip),
		redisstore.WithUndoFailure(func(charges int, err error) {
			m.UndoFailed()
			log.Warn("cross-slot undo failed; the denied request's hits stay charged until their window passes",
				zap.Int("counters", charges), zap.String("error", redactSecrets(err.Error(), set)))
		}),
	)
	st, err := redisstore.New(opts...)
	if err != nil {
		// Not wrapped: the message may quote credentials, so only a redacted
		// copy leaves this function.
		return nil, fmt.Errorf("redis store (REDIS_URL=%s): %s", redactURL(set.RedisURL), redactSecrets(err.Error(), set))
	}
	return st, nil
}

// redisConnection is how every client of ours reaches Redis (the limiter's
// store and the delay queue): REDIS_URL, REDIS_TYPE, REDIS_SOCKET_TYPE,
// REDIS_AUTH, REDIS_POOL_SIZE, REDIS_TIMEOUT, REDIS_TLS* and REDIS_BREAKER_*.
func redisConnection(set settings) ([]redisstore.Option, error) {
	opts := []redisstore.Option{
		redisstore.WithAddr(set.RedisURL),
		redisstore.WithType(set.RedisType),
		redisstore.WithSocketType(set.RedisSocketType),
		redisstore.WithAuth(set.RedisAuth),
		redisstore.WithPoolSize(set.RedisPoolSize),
		redisstore.WithTimeout(set.RedisTimeout),
		redisstore.WithBreaker(set.RedisBreakerThreshold, set.RedisBreakerProbeInterval),
	}
	if set.RedisTLS {
		cfg, err := redisTLS(set)
		if err != nil {
			return nil, err
		}
		opts = append(opts, redisstore.WithTLS(cfg))
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
