package client

import (
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Option configures a Client.
type Option func(*options)

type options struct {
	tls        *tls.Config
	dial       []grpc.DialOption
	adminToken string
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func (o options) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	return append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, o.dial...)
}

// WithTLS dials with TLS (ratelimitd's GRPC_SERVER_USE_TLS); give the
// config a client certificate for mutual TLS (GRPC_CLIENT_TLS_CACERT, and
// ADMIN_CLIENT_SAN for the counters API).
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// WithDialOptions adds grpc.NewClient options to Dial's, for instance a
// service config that balances over every replica behind a DNS name
// (grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`)).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

// WithAdminToken is the counters API's bearer token (the content of the
// server's ADMIN_TOKEN_FILE), sent with counters calls only. Over plaintext
// it crosses the network in clear: use WithTLS beyond loopback.
func WithAdminToken(token string) Option {
	return func(o *options) { o.adminToken = token }
}
