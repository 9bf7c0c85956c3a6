package main

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"/var/run/redis.sock", "/var/run/redis.sock"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:s3cret@127.0.0.1:6379", "redis://:xxxxx@127.0.0.1:6379"},
		{"rediss://user:s3cret@redis.example:6380/1", "rediss://user:xxxxx@redis.example:6380/1"},
		{"redis://user@host:1", "redis://user@host:1"},
		{"mymaster,redis://:s3cret@10.0.0.1:26379,10.0.0.2:26379", "mymaster,redis://:xxxxx@10.0.0.1:26379,10.0.0.2:26379"},
		{"redis://us er:s3cret@bad url", "xxxxx@bad url"},
	}
	for _, tt := range tests {
		got := redactURL(tt.in)
		if got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("redactURL(%q) leaks the password: %q", tt.in, got)
		}
	}
}

func TestRedactSecrets(t *testing.T) {
	set := settings{RedisURL: "mymaster,redis://:pw-one@10.0.0.1:26379", RedisAuth: "admin:pw-two"}
	msg := `sentinel address "redis://:pw-one@10.0.0.1:26379" is not host:port; auth admin:pw-two failed`
	got := redactSecrets(msg, set)
	for _, secret := range []string{"pw-one", "pw-two"} {
		if strings.Contains(got, secret) {
			t.Errorf("redactSecrets left %q in %q", secret, got)
		}
	}
	if !strings.Contains(got, "10.0.0.1:26379") {
		t.Errorf("redactSecrets removed more than the secrets: %q", got)
	}
}
