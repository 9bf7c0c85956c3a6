// Package redisconn is how ratelimitd reaches Redis: the connection
// settings (REDIS_URL, REDIS_TYPE, REDIS_SOCKET_TYPE, REDIS_AUTH,
// REDIS_TLS, REDIS_POOL_SIZE, REDIS_TIMEOUT) and the fail-fast go-redis
// client built from them, with a circuit breaker per node
// (REDIS_BREAKER_THRESHOLD, REDIS_BREAKER_PROBE_INTERVAL). The limiter's
// store (pkg/store/redisstore) and the delay queue's client are built from
// one Config, so the two reach the same Redis the same way and fail fast the
// same way while a node is down; what each adds on top (scripts,
// pipelining) stays with it.
package redisconn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// NewClient builds the go-redis client s describes, with a breaker on every
// node when s.BreakerThreshold is above 0. The caller owns and closes it;
// closing it also ends its breakers' probes (at their next tick, when their
// PING finds the client closed).
func (s Config) NewClient() (redis.UniversalClient, error) {
	c, _, err := s.Open()
	return c, err
}

// Open is NewClient that also returns stop, which ends the breakers' probes
// at once and leaves them refusing nothing; an owner that shuts the client
// down in steps (redisstore's Store.Close) calls it before closing the
// client. The breakers are the client's first hooks, so hooks added later
// (redisstore's pipelining) run behind them: an open breaker answers before
// a call queues.
func (s Config) Open() (c redis.UniversalClient, stop func(), err error) {
	c, err = s.client()
	if err != nil {
		return nil, nil, err
	}
	return c, guard(c, s), nil
}

// client builds the go-redis client without breakers.
func (s Config) client() (redis.UniversalClient, error) {
	if s.Timeout <= 0 {
		return nil, fmt.Errorf("redisconn: timeout must be positive, got %s", s.Timeout)
	}
	if s.PoolSize <= 0 {
		return nil, fmt.Errorf("redisconn: pool size must be positive, got %d", s.PoolSize)
	}
	if strings.TrimSpace(s.Addr) == "" {
		return nil, errors.New("redisconn: no redis address (REDIS_URL)")
	}
	u := universal(s)
	switch s.Type {
	case Single:
		opt, err := single(s, u)
		if err != nil {
			return nil, err
		}
		return redis.NewClient(opt), nil
	case Sentinel:
		master, sentinels, err := splitSentinel(s.Addr)
		if err != nil {
			return nil, err
		}
		u.MasterName, u.Addrs = master, sentinels
		return redis.NewFailoverClient(u.Failover()), nil
	case Cluster:
		nodes, err := splitHosts(s.Addr)
		if err != nil {
			return nil, fmt.Errorf("redisconn: cluster address: %w", err)
		}
		u.Addrs = nodes
		return redis.NewClusterClient(u.Cluster()), nil
	default:
		return nil, fmt.Errorf("redisconn: unknown redis type %s", s.Type)
	}
}

// universal holds what every deployment type shares. Failing fast is the
// point of most of it: Envoy waits 20 ms by default, so a dead Redis must
// surface as an error, not as go-redis retrying for seconds.
func universal(s Config) *redis.UniversalOptions {
	user, pass := splitAuth(s.Auth)
	return &redis.UniversalOptions{
		Username: user,
		Password: pass,
		// A retried EVALSHA whose reply was lost would charge twice, and
		// retries multiply the wait on a dead Redis: never retry.
		MaxRetries: -1,
		// Cluster: go-redis would follow MOVED/ASK but also re-send after an
		// EOF; redirects are retried by Store.do, which knows which errors
		// certainly ran nothing.
		MaxRedirects: -1,
		// One dial per attempt; the pool redials in the background once
		// every connection has failed.
		DialerRetries:         1,
		DialTimeout:           s.Timeout,
		ReadTimeout:           s.Timeout,
		WriteTimeout:          s.Timeout,
		PoolTimeout:           s.Timeout,
		ContextTimeoutEnabled: true,
		PoolSize:              s.PoolSize,
		TLSConfig:             tlsOrNil(s.TLS),
		// CLIENT SETINFO and MAINT_NOTIFICATIONS cost a round trip per new
		// connection and do nothing for us (Redis 7.0 rejects SETINFO anyway).
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

func single(s Config, u *redis.UniversalOptions) (*redis.Options, error) {
	addr := strings.TrimSpace(s.Addr)
	if strings.Contains(addr, "://") {
		parsed, err := redis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redisconn: redis url: %w", err)
		}
		u.Addrs = []string{parsed.Addr}
		u.DB = parsed.DB
		if s.Auth == "" {
			u.Username, u.Password = parsed.Username, parsed.Password
		}
		if u.TLSConfig == nil {
			u.TLSConfig = parsed.TLSConfig
		}
		opt := u.Simple()
		opt.Network = parsed.Network
		return opt, nil
	}
	switch s.SocketType {
	case "", "tcp":
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("redisconn: redis address %q: %w", addr, err)
		}
	case "unix":
	default:
		return nil, fmt.Errorf("redisconn: socket type %q is neither tcp nor unix", s.SocketType)
	}
	u.Addrs = []string{addr}
	opt := u.Simple()
	if s.SocketType == "unix" {
		opt.Network = "unix"
	}
	return opt, nil
}

// splitSentinel parses envoyproxy's "mastername,host:port,host:port".
func splitSentinel(addr string) (master string, sentinels []string, err error) {
	master, rest, ok := strings.Cut(addr, ",")
	master = strings.TrimSpace(master)
	if !ok || master == "" {
		return "", nil, fmt.Errorf("redisconn: sentinel address %q: want mastername,host:port[,host:port...]", addr)
	}
	sentinels, err = splitHosts(rest)
	if err != nil {
		return "", nil, fmt.Errorf("redisconn: sentinel address: %w", err)
	}
	return master, sentinels, nil
}

func splitHosts(list string) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(list, ",") {
		h = strings.TrimSpace(h)
		if _, _, err := net.SplitHostPort(h); err != nil {
			return nil, fmt.Errorf("%q is not host:port: %w", h, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// splitAuth reads REDIS_AUTH like envoyproxy/ratelimit: "user:password" for
// an ACL user, otherwise the whole value is the password.
func splitAuth(auth string) (user, pass string) {
	if u, p, ok := strings.Cut(auth, ":"); ok {
		return u, p
	}
	return "", auth
}

// tlsOrNil keeps a nil config nil so go-redis does not switch TLS on.
func tlsOrNil(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	return cfg.Clone()
}
