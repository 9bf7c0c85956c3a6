package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ratelimitd/ratelimitd/internal/redact"
)

func TestString(t *testing.T) {
	r := redact.New("s3cret", `q"uo\te`, "p w+&", "", "s3cret-longer")
	tests := []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"auth s3cret failed", "auth xxxxx failed"},
		{"redis://:s3cret@10.0.0.1:6379,redis://:s3cret@10.0.0.2", "redis://:xxxxx@10.0.0.1:6379,redis://:xxxxx@10.0.0.2"},
		// The longer secret is masked whole, not as the shorter plus a tail.
		{"token s3cret-longer", "token xxxxx"},
		// As JSON writes it, and as URLs percent-encode it.
		{`{"error":"q\"uo\\te"}`, `{"error":"xxxxx"}`},
		{"redis://:p%20w+&@h", "redis://:xxxxx@h"},
		{"?pw=p+w%2B%26", "?pw=xxxxx"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, none := range []*redact.Redactor{nil, redact.New(), redact.New("")} {
		if got := none.String("s3cret"); got != "s3cret" {
			t.Errorf("a Redactor of no secrets changed %q to %q", "s3cret", got)
		}
	}
}

func TestError(t *testing.T) {
	r := redact.New("s3cret")
	err := r.Error(fmt.Errorf("redis url %q: %w", "redis://:s3cret@h", fs.ErrInvalid))
	if strings.Contains(err.Error(), "s3cret") || !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Error = %q (errors.Is ErrInvalid: %v), want the secret masked and the chain kept", err, errors.Is(err, fs.ErrInvalid))
	}
	plain := errors.New("no secret")
	if r.Error(plain) != plain || r.Error(nil) != nil {
		t.Error("an error without a secret, or nil, came back changed")
	}
}

// TestEncoder: whatever way a secret reaches a line (the message, a string,
// an error, a value rendered by reflection, a field added by With, a named
// logger), it is masked, in both of the daemon's encodings.
func TestEncoder(t *testing.T) {
	const secret = `pw-"7\x`
	r := redact.New(secret)
	err := fmt.Errorf("dial: %w", errors.New("auth "+secret+" refused"))
	encoders := map[string]zapcore.Encoder{
		"json":    zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		"console": zapcore.NewConsoleEncoder(zap.NewProductionEncoderConfig()),
	}
	for name, enc := range encoders {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := zap.New(zapcore.NewCore(r.Encoder(enc), zapcore.AddSync(&buf), zapcore.DebugLevel))
			log.Warn("message with "+secret, zap.Error(err))
			log.With(zap.String("url", "redis://:"+secret+"@h")).Named("child").Info("with")
			log.Info("reflected", zap.Any("settings", map[string]string{"auth": secret}), zap.Stringer("s", stringer(secret)))
			log.Error("stack", zap.Stack("stack"), zap.Strings("list", []string{secret}))
			out := buf.String()
			if n := strings.Count(out, "\n"); n != 4 {
				t.Fatalf("%d lines, want 4:\n%s", n, out)
			}
			for _, form := range []string{secret, `pw-\"7\\x`} {
				if strings.Contains(out, form) {
					t.Errorf("the secret (as %q) is in the log:\n%s", form, out)
				}
			}
			if n := strings.Count(out, redact.Mask); n != 6 {
				t.Errorf("%d masks, want 6, one per place the secret was:\n%s", n, out)
			}
		})
	}
}

type stringer string

func (s stringer) String() string { return string(s) }
