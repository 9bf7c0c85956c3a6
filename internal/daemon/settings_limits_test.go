package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHardeningSettings(t *testing.T) {
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth")
	if err := os.WriteFile(auth, []byte("user:pw-File\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want func(*settings)
	}{
		{
			name: "bounds and pprof",
			env:  map[string]string{"GRPC_MAX_RECV_MESSAGE_SIZE": "1048576", "GRPC_MAX_CONCURRENT_STREAMS": "64", "MAX_DECODING_BYTES": "1048576", "DEBUG_PPROF": "true"},
			want: func(s *settings) {
				s.GRPCMaxRecvBytes, s.GRPCMaxStreams, s.MaxDecodingBytes, s.DebugPprof = 1<<20, 64, 1<<20, true
			},
		},
		{
			name: "streams 0: gRPC's own bound (none), as envoyproxy's 0",
			env:  map[string]string{"GRPC_MAX_CONCURRENT_STREAMS": "0"},
			want: func(s *settings) { s.GRPCMaxStreams = 0 },
		},
		{
			name: "streams: envoyproxy's largest",
			env:  map[string]string{"GRPC_MAX_CONCURRENT_STREAMS": "4294967294"},
			want: func(s *settings) { s.GRPCMaxStreams = 4294967294 },
		},
		{
			name: "REDIS_AUTH_FILE, its line ending trimmed",
			env:  map[string]string{"REDIS_AUTH_FILE": auth},
			want: func(s *settings) { s.RedisAuth = "user:pw-File" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSettings(nil, envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			want := defaultSettings()
			tt.want(&want)
			if got.GRPCMaxRecvBytes != want.GRPCMaxRecvBytes || got.GRPCMaxStreams != want.GRPCMaxStreams ||
				got.MaxDecodingBytes != want.MaxDecodingBytes || got.DebugPprof != want.DebugPprof || got.RedisAuth != want.RedisAuth {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestHardeningSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"streams at gRPC's unbounded sentinel", map[string]string{"GRPC_MAX_CONCURRENT_STREAMS": "4294967295"}, `GRPC_MAX_CONCURRENT_STREAMS="4294967295"`},
		{"negative streams", map[string]string{"GRPC_MAX_CONCURRENT_STREAMS": "-1"}, `GRPC_MAX_CONCURRENT_STREAMS="-1"`},
		{"tiny decode budget", map[string]string{"MAX_DECODING_BYTES": "10"}, `MAX_DECODING_BYTES="10"`},
		{"missing auth file", map[string]string{"REDIS_AUTH_FILE": filepath.Join(dir, "nope")}, "REDIS_AUTH_FILE"},
		{"empty auth file", map[string]string{"REDIS_AUTH_FILE": write("empty", "\n")}, "want one non-empty line"},
		{"two lines", map[string]string{"REDIS_AUTH_FILE": write("two", "pw-Secret1\nmore\n")}, "want one non-empty line"},
		{"huge file", map[string]string{"REDIS_AUTH_FILE": write("big", strings.Repeat("x", 5000))}, "not a password file"},
		{"both set", map[string]string{"REDIS_AUTH_FILE": write("ok", "pw"), "REDIS_AUTH": "pw"}, "both set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseSettings(nil, envOf(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw-Secret1") {
				t.Errorf("the error quotes the file's content: %v", err)
			}
		})
	}
}
