package daemon

import "fmt"

// readGatewayCompat reports settings a controller sets that envoyproxy
// itself does not read, so an operator learns they do nothing here either.
func (s *settings) readGatewayCompat(env *envReader) {
	// Envoy Gateway sets GRPC_SERVER_TLS_CA_CERT next to the server pair;
	// envoyproxy/ratelimit's name for the client CA is
	// GRPC_CLIENT_TLS_CACERT, so with either service client certificates
	// are not required. Requiring them here would break every Envoy that
	// does not present one, so keep envoyproxy's behaviour and say so.
	if v, ok := env.raw("GRPC_SERVER_TLS_CA_CERT"); ok && s.GRPCClientCACert == "" {
		s.Warnings = append(s.Warnings, fmt.Sprintf(
			"GRPC_SERVER_TLS_CA_CERT=%s is not an envoyproxy/ratelimit setting and has no effect (as with envoyproxy): gRPC clients are not asked for certificates; set GRPC_CLIENT_TLS_CACERT to require them", v))
	}
}
