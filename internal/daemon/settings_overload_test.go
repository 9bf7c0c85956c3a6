package daemon

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDropInSettings: envoyproxy's 2026 settings (#1168, #1190, #1191,
// #1241, #1243) are read with their defaults and names.
func TestDropInSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    func(*settings)
		warning string
	}{
		{
			name: "request headers with their own names",
			env: map[string]string{"LIMIT_REQUEST_HEADERS_ENABLED": "true", "LIMIT_REQUEST_LIMIT_HEADER": "X-Up-Limit",
				"LIMIT_REQUEST_REMAINING_HEADER": "X-Up-Left", "LIMIT_REQUEST_RESET_HEADER": "X-Up-Reset"},
			want: func(s *settings) {
				s.Headers.Request, s.Headers.RequestLimit, s.Headers.RequestRemaining, s.Headers.RequestReset = true, "X-Up-Limit", "X-Up-Left", "X-Up-Reset"
			},
		},
		{
			name: "headers for every limit",
			env:  map[string]string{"LIMIT_ALL_DESCRIPTORS_HEADERS_ENABLED": "true"},
			want: func(s *settings) { s.Headers.AllLimits = true },
		},
		{
			name: "overload bounds by default: a cap on decisions in progress, no timeout",
			env:  map[string]string{},
			want: func(s *settings) {
				s.Overload = overloadSettings{MaxConcurrentRequests: 10_000}
			},
		},
		{
			name: "no cap, as in envoyproxy",
			env:  map[string]string{"MAX_CONCURRENT_REQUESTS": "0"},
			want: func(s *settings) { s.Overload.MaxConcurrentRequests = 0 },
		},
		{
			name: "overload bounds",
			env:  map[string]string{"MAX_CONCURRENT_REQUESTS": "5000", "REQUEST_TIMEOUT": "250ms"},
			want: func(s *settings) {
				s.Overload = overloadSettings{MaxConcurrentRequests: 5000, RequestTimeout: 250 * time.Millisecond}
			},
		},
		{
			name: "quota groups",
			env:  map[string]string{"QUOTA_GROUP_BY_BACKEND": "true"},
			want: func(s *settings) { s.QuotaGroups = true },
		},
		{
			name: "closing READONLY connections, as always",
			env:  map[string]string{"REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR": "true"},
			want: func(*settings) {},
		},
		{
			name:    "keeping them cannot be asked for",
			env:     map[string]string{"REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR": "false"},
			want:    func(*settings) {},
			warning: "REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR=false has no effect",
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
			if got.Headers != want.Headers || got.Overload != want.Overload || got.QuotaGroups != want.QuotaGroups {
				t.Errorf("got headers %+v, overload %+v, groups %v\nwant %+v, %+v, %v",
					got.Headers, got.Overload, got.QuotaGroups, want.Headers, want.Overload, want.QuotaGroups)
			}
			warned := slices.ContainsFunc(got.Warnings, func(w string) bool { return tt.warning != "" && strings.Contains(w, tt.warning) })
			if warned != (tt.warning != "") || (tt.warning == "" && len(got.Warnings) > 0) {
				t.Errorf("warnings %q, want %q", got.Warnings, tt.warning)
			}
		})
	}
}

// TestDropInSettingsRefused: a malformed envoyproxy setting is an error.
func TestDropInSettingsRefused(t *testing.T) {
	for _, bad := range []map[string]string{
		{"MAX_CONCURRENT_REQUESTS": "-1"}, {"REQUEST_TIMEOUT": "-1s"}, {"REQUEST_TIMEOUT": "soon"},
		{"LIMIT_REQUEST_HEADERS_ENABLED": "yes please"}, {"QUOTA_GROUP_BY_BACKEND": "2"},
	} {
		if _, err := parseSettings(nil, envOf(bad)); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}
