package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAdminSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("token", "  0123456789abcdef-token\n")
	mtls := map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k", "GRPC_CLIENT_TLS_CACERT": "ca"}
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range mtls {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	tests := []struct {
		name    string
		env     map[string]string
		token   string
		sans    []string
		wantErr string
	}{
		{name: "off by default", env: map[string]string{}},
		{name: "token, spaces trimmed", env: map[string]string{"ADMIN_TOKEN_FILE": good}, token: "0123456789abcdef-token"},
		{name: "SANs with mutual TLS", env: with(map[string]string{"ADMIN_CLIENT_SAN": "spiffe://c/ns/ops/sa/admin, ops.example.com"}), sans: []string{"spiffe://c/ns/ops/sa/admin", "ops.example.com"}},
		{name: "both", env: with(map[string]string{"ADMIN_TOKEN_FILE": good, "ADMIN_CLIENT_SAN": "ops"}), token: "0123456789abcdef-token", sans: []string{"ops"}},
		{name: "missing file", env: map[string]string{"ADMIN_TOKEN_FILE": filepath.Join(dir, "nope")}, wantErr: "ADMIN_TOKEN_FILE"},
		{name: "short token", env: map[string]string{"ADMIN_TOKEN_FILE": write("short", "hunter2\n")}, wantErr: "at least 16"},
		{name: "token with a space", env: map[string]string{"ADMIN_TOKEN_FILE": write("space", "0123456789 abcdef-token\n")}, wantErr: "without spaces"},
		{name: "two lines", env: map[string]string{"ADMIN_TOKEN_FILE": write("lines", "0123456789abcdef\nsecond-line-here\n")}, wantErr: "one non-empty line"},
		{name: "SAN without TLS", env: map[string]string{"ADMIN_CLIENT_SAN": "ops"}, wantErr: "needs mutual TLS"},
		{name: "SAN without a client CA", env: map[string]string{"ADMIN_CLIENT_SAN": "ops", "GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k"}, wantErr: "needs mutual TLS"},
		{name: "SAN list of commas", env: with(map[string]string{"ADMIN_CLIENT_SAN": " , ,"}), wantErr: "ADMIN_CLIENT_SAN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSettings(nil, envOf(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "abcdef") {
					t.Errorf("the error quotes the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Admin.Token) != tt.token || !slices.Equal(got.Admin.ClientSANs, tt.sans) {
				t.Errorf("token %q sans %q, want %q %q", got.Admin.Token, got.Admin.ClientSANs, tt.token, tt.sans)
			}
		})
	}
}
