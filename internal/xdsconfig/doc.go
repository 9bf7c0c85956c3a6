// Package xdsconfig is the CONFIG_TYPE=GRPC_XDS_SOTW config source: an
// aggregated (ADS) state-of-the-world subscription to
// ratelimit.config.ratelimit.v3.RateLimitConfig resources, the way
// envoyproxy/ratelimit and Envoy Gateway's xDS server speak it. Every
// response is loaded as a whole with the file loader's rules; a good one is
// ACKed and swapped in, a bad one is NACKed with the loader's errors and the
// last good config stays.
package xdsconfig
