package daemon

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/ratelimitd/ratelimitd/pkg/service"
)

// Defaults of the hardening settings.
const (
	// defaultGRPCMaxStreams bounds streams per connection; Envoy opens
	// another connection when one is full, so it bounds memory, not traffic.
	defaultGRPCMaxStreams = 256
	// maxAuthFileBytes: a password file is one line.
	maxAuthFileBytes = 4096
)

// readHardening reads the bounds on what one client can make the server
// hold, whether pprof is served, and REDIS_AUTH_FILE.
func (s *settings) readHardening(env *envReader) {
	s.GRPCMaxRecvBytes = env.integer("GRPC_MAX_RECV_MESSAGE_SIZE", 0, 0, 1<<30)
	// 0 and the upper bound are envoyproxy's: 0 leaves gRPC's own (no
	// bound), and MaxUint32 is gRPC's sentinel for it.
	s.GRPCMaxStreams = env.integer("GRPC_MAX_CONCURRENT_STREAMS", defaultGRPCMaxStreams, 0, math.MaxUint32-1)
	s.MaxDecodingBytes = env.integer("MAX_DECODING_BYTES", service.DefaultDecodeBudget, 1<<16, 1<<34)
	s.DebugPprof = env.boolean("DEBUG_PPROF", false)
	if path, ok := env.raw("REDIS_AUTH_FILE"); ok {
		if s.RedisAuth != "" {
			env.errs = append(env.errs, fmt.Errorf("REDIS_AUTH and REDIS_AUTH_FILE are both set: keep one"))
			return
		}
		auth, err := readSecretFile(path)
		if err != nil {
			// The error names the file, never its content.
			env.errs = append(env.errs, fmt.Errorf("REDIS_AUTH_FILE: %w", err))
			return
		}
		s.RedisAuth = auth
	}
}

// readSecretFile reads a password or user:password from a file (a
// Kubernetes Secret mount), so it need not be in the environment or on
// the command line, where /proc/PID/environ and ps show it.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxAuthFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if len(buf) > maxAuthFileBytes {
		return "", fmt.Errorf("%s is longer than %d bytes: not a password file", path, maxAuthFileBytes)
	}
	secret := strings.TrimRight(string(buf), "\r\n")
	if secret == "" || strings.ContainsAny(secret, "\r\n") {
		return "", fmt.Errorf("%s: want one non-empty line", path)
	}
	return secret, nil
}
