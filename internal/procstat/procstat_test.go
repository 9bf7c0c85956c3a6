package procstat

import (
	"os"
	"testing"
	"time"
)

// TestCPUTime reads this process's own /proc/PID/stat while it burns CPU:
// the figure must grow (the wall-clock cap only guards a broken reader).
func TestCPUTime(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x, used := 0, time.Duration(0)
	for start := time.Now(); used < 30*time.Millisecond && time.Since(start) < 10*time.Second; {
		for range 1_000_000 {
			x++
		}
		now, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		used = now - before
	}
	if used < 30*time.Millisecond {
		t.Errorf("spinning for 10s read as %s of CPU (x=%d)", used, x)
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1) succeeded")
	}
}
