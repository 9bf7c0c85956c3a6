package redisstore

import "github.com/redis/go-redis/v9"

// NewClient builds the go-redis client New would build from opts (address,
// type, auth, TLS, pool and timeouts, which internal/redisconn turns into a
// client, plus the breakers), for features that share ratelimitd's Redis
// settings but not its scripts, such as the delay queue.
// The caller owns and closes it; closing it also ends its breakers' probes.
func NewClient(opts ...Option) (redis.UniversalClient, error) {
	s := defaults()
	for _, opt := range opts {
		opt(&s)
	}
	c, err := newClient(s)
	if err != nil {
		return nil, err
	}
	guard(c, s)
	return c, nil
}

// newClient builds the client s's connection settings describe
// (internal/redisconn), without the store's hooks.
func newClient(s settings) (redis.UniversalClient, error) { return s.conn.NewClient() }
