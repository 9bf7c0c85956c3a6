package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitd/ratelimitd/internal/redistest"
	"github.com/ratelimitd/ratelimitd/pkg/store/redisstore"
)

// Which errors may be retried: only those that certainly ran nothing.
func TestRetryClassification(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	read := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		err   error
		retry bool
	}{
		{dial, true},
		{fmt.Errorf("take script: %w", dial), true},
		{redis.ErrClosed, true},
		{redis.ErrPoolTimeout, true},
		{read, false},
		{io.EOF, false},
		{io.ErrUnexpectedEOF, false},
		{context.DeadlineExceeded, false},
		{&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, false},
		{errors.New("some unknown failure"), false},
	}
	for _, tt := range tests {
		if got := redisstore.Retryable(tt.err); got != tt.retry {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.retry)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }

func (timeoutErr) Timeout() bool { return true }

// The server's own replies: redirects and cluster states ran nothing; a
// script error ran and is not retried either.
func TestRetryClassificationOfServerReplies(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	tests := []struct {
		reply string
		retry bool
	}{
		{"MOVED 3999 127.0.0.1:6381", true},
		{"ASK 3999 127.0.0.1:6381", true},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true},
		{"CLUSTERDOWN The cluster is down", true},
		{"LOADING Redis is loading the dataset in memory", true},
		{"READONLY You can't write against a read only replica.", true},
		{"NOSCRIPT No matching script.", true},
		{"ERR Function not found", true},
		{"ERR user_script:1: Script attempted to access nonexistent global variable", false},
		{"CROSSSLOT Keys in request don't hash to the same slot", false},
	}
	for _, tt := range tests {
		// A real error reply parsed by go-redis, as Take would see it.
		err := c.Eval(t.Context(), "return redis.error_reply(ARGV[1])", nil, tt.reply).Err()
		if err == nil {
			t.Fatalf("no error for %q", tt.reply)
		}
		if got := redisstore.Retryable(err); got != tt.retry {
			t.Errorf("Retryable(%q) = %v, want %v", err, got, tt.retry)
		}
	}
}
