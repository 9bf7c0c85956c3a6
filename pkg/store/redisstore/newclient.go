package redisstore

import "github.com/redis/go-redis/v9"

// NewClient builds the go-redis client New would build from opts (address,
// type, auth, TLS, pool, timeouts), for features that share ratelimitd's
// Redis settings but not its scripts, such as the delay queue. The caller
// owns and closes it.
func NewClient(opts ...Option) (redis.UniversalClient, error) {
	s := defaults()
	for _, opt := range opts {
		opt(&s)
	}
	return newClient(s)
}
