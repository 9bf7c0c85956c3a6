package daemon

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	tests := []struct {
		name    string
		backend backendKind
		env     map[string]string
		want    int // GC percent afterwards; -2 means unchanged
	}{
		{name: "redis without GOGC", backend: backendRedis, want: redisGCPercent},
		{name: "GOGC wins", backend: backendRedis, env: map[string]string{"GOGC": "100"}, want: -2},
		{name: "memory keeps the default", backend: backendMemory, want: -2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const sentinel = 137
			prev := debug.SetGCPercent(sentinel)
			defer debug.SetGCPercent(prev)
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			applied := tuneGC(settings{Backend: tc.backend}, lookup)
			got := debug.SetGCPercent(sentinel)
			want := tc.want
			if want == -2 {
				want = sentinel
			}
			if got != want || applied != (tc.want != -2) {
				t.Errorf("GC percent %d (applied %v), want %d", got, applied, want)
			}
		})
	}
}
