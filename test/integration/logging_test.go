package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/testkit"
)

// TestLogLevelAndFormatFromTheFirstLine is envoyproxy's #1192 on the
// binary's stderr: LOG_LEVEL and LOG_FORMAT hold for every line, from the
// startup warnings to what a library reports later (OpenTelemetry's SDK
// writes a failed export as a plain line of Go's log unless routed).
func TestLogLevelAndFormatFromTheFirstLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		level string
		// want: the messages that must appear (the level lets them through;
		// at error the same failures happen, and stop flushes the spans).
		want []string
	}{
		{level: "warn", want: []string{"REDIS_PERSECOND=true is not supported", "traces export"}},
		{level: "error"},
	} {
		t.Run(tt.level, func(t *testing.T) {
			root, _ := newConfigRoot(t, map[string]string{"it.yaml": itConfig})
			// Nothing listens on port 1: every export fails.
			svc := startService(t, root, "LOG_FORMAT=json", "LOG_LEVEL="+tt.level, "REDIS_PERSECOND=true",
				"TRACING_ENABLED=true", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1/v1/traces", "OTEL_BSP_SCHEDULE_DELAY=50")
			for range 3 {
				if _, err := svc.call(request("it", desc("generic_key", "shared"))); err != nil {
					t.Fatal(err)
				}
			}
			testkit.WaitFor(t, 10*time.Second, "the expected lines", func() bool {
				for _, w := range tt.want {
					if !strings.Contains(svc.logs.String(), w) {
						return false
					}
				}
				return true
			})
			svc.stop()
			for _, line := range strings.Split(strings.TrimSpace(svc.logs.String()), "\n") {
				if line == "" {
					continue
				}
				var entry struct{ Level, Msg string }
				if err := json.Unmarshal([]byte(line), &entry); err != nil {
					t.Errorf("not a JSON line: %q", line)
					continue
				}
				if !allowedLevel(tt.level, entry.Level, entry.Msg) {
					t.Errorf("LOG_LEVEL=%s let through %s: %q", tt.level, entry.Level, line)
				}
			}
		})
	}
}

// allowedLevel: the configured level and above, and at the default warn
// the startup lines ratelimitd always says (docs/operations.md).
func allowedLevel(configured, level, msg string) bool {
	switch level {
	case "error":
		return true
	case "warn":
		return configured == "warn"
	case "info":
		return configured == "warn" && (msg == "ratelimitd listening" || msg == "tracing enabled")
	}
	return false
}
