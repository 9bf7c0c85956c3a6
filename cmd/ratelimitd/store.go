package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ratelimitd/ratelimitd/pkg/metrics"
	"github.com/ratelimitd/ratelimitd/pkg/store"
	"github.com/ratelimitd/ratelimitd/pkg/store/localcache"
	"github.com/ratelimitd/ratelimitd/pkg/store/memstore"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

func newStore(set settings, m *metrics.Metrics, log *zap.Logger) (store.Store, error) {
	st, err := newBackend(set, m, log)
	if err != nil || set.LocalCacheBytes == 0 {
		return st, err
	}
	cache := localcache.New(st, set.LocalCacheBytes)
	m.Registry().MustRegister(localCacheCollectors(cache)...)
	return cache, nil
}

func newBackend(set settings, m *metrics.Metrics, log *zap.Logger) (store.Store, error) {
	if set.Backend != backendRedis {
		st := memstore.New(memstore.WithMaxKeys(set.MemoryMaxKeys))
		m.Registry().MustRegister(memstoreCollectors(st)...)
		return st, nil
	}
	opts := []redisstore.Option{
		redisstore.WithAddr(set.RedisURL),
		redisstore.WithType(set.RedisType),
		redisstore.WithSocketType(set.RedisSocketType),
		redisstore.WithAuth(set.RedisAuth),
		redisstore.WithPoolSize(set.RedisPoolSize),
		redisstore.WithTimeout(set.RedisTimeout),
		redisstore.WithPipeline(set.RedisPipelineWindow, set.RedisPipelineLimit),
		redisstore.WithRoundTripObserver(m.RoundTrip),
		redisstore.WithUndoFailure(func(charges int, err error) {
			m.UndoFailed()
			log.Warn("cross-slot undo failed; the denied request's hits stay charged until their window passes",
				zap.Int("counters", charges), zap.String("error", redactSecrets(err.Error(), set)))
		}),
	}
	if set.RedisTLS {
		cfg, err := redisTLS(set)
		if err != nil {
			return nil, err
		}
		opts = append(opts, redisstore.WithTLS(cfg))
	}
	st, err := redisstore.New(opts...)
	if err != nil {
		// Not wrapped: the message may quote credentials, so only a redacted
		// copy leaves this function.
		return nil, fmt.Errorf("redis store (REDIS_URL=%s): %s", redactURL(set.RedisURL), redactSecrets(err.Error(), set))
	}
	return st, nil
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

// localCacheCollectors expose the cache's own counters.
func localCacheCollectors(c *localcache.Store) []prometheus.Collector {
	stat := func(name, help string, pick func(hits, misses, evictions uint64) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ratelimitd", Subsystem: "local_cache", Name: name, Help: help},
			func() float64 { return float64(pick(c.Stats())) })
	}
	return []prometheus.Collector{
		stat("hits_total", "Requests answered from the local over-limit cache.", func(h, _, _ uint64) uint64 { return h }),
		stat("misses_total", "Requests the local cache sent to the backend.", func(_, m, _ uint64) uint64 { return m }),
		stat("evictions_total", "Entries evicted to keep the cache within LOCAL_CACHE_SIZE_IN_BYTES.", func(_, _, e uint64) uint64 { return e }),
	}
}

// memstoreCollectors expose the embedded store's size and what it dropped:
// evictions mean MEMORY_MAX_KEYS is too small for the traffic.
func memstoreCollectors(s *memstore.Store) []prometheus.Collector {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "ratelimitd", Subsystem: "memstore", Name: name, Help: help}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("keys", "Keys held by the embedded store, expired ones not yet swept included.")),
			func() float64 { return float64(s.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("evictions_total", "Live keys dropped to stay within MEMORY_MAX_KEYS.")),
			func() float64 { return float64(s.Evictions()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("expired_total", "Expired keys dropped by the background sweep.")),
			func() float64 { return float64(s.Expired()) }),
	}
}
