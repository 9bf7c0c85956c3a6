package daemon

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestQueueSettings(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    queueSettings
		wantErr string
	}{
		{"defaults", nil, queueSettings{Enabled: true, MetricQueues: 100, KeyPrefix: "ratelimitd:queue:"}, ""},
		{"set", map[string]string{"QUEUE_ENABLED": "false", "QUEUE_METRIC_QUEUES": "7", "QUEUE_KEY_PREFIX": "q:"},
			queueSettings{MetricQueues: 7, KeyPrefix: "q:"}, ""},
		{"bad enabled", map[string]string{"QUEUE_ENABLED": "maybe"}, queueSettings{}, "QUEUE_ENABLED"},
		{"bad metric queues", map[string]string{"QUEUE_METRIC_QUEUES": "-1"}, queueSettings{}, "QUEUE_METRIC_QUEUES"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if s, ok := parseOrReject(t, c.env, c.wantErr); ok && s.Queue != c.want {
				t.Fatalf("got %+v, want %+v", s.Queue, c.want)
			}
		})
	}
}

// TestQueueKeyPrefixBraces: a prefix that would move the Cluster hash tag
// fails the start, naming the setting.
func TestQueueKeyPrefixBraces(t *testing.T) {
	set := defaultSettings()
	set.Backend, set.RedisURL = backendRedis, "127.0.0.1:1"
	set.Queue.KeyPrefix = "a{b}"
	set.ConfigDir = t.TempDir()
	set.ForceStartWithoutConfig = true
	_, err := newApp(set, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "QUEUE_KEY_PREFIX") {
		t.Fatalf("newApp: %v, want a QUEUE_KEY_PREFIX error", err)
	}
}
