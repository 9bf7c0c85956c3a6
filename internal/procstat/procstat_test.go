package procstat

import (
	"os"
	"runtime"
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

// TestRSS reads this process's resident memory before and after it touches
// 64 MiB it has allocated: the figure must grow by most of it.
func TestRSS(t *testing.T) {
	before, err := RSS(os.Getpid())
	if err != nil || before == 0 {
		t.Fatalf("RSS %d, %v", before, err)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after < before+48<<20 {
		t.Errorf("RSS %d after touching 64 MiB, %d before", after, before)
	}
	runtime.KeepAlive(buf)
	if _, err := RSS(-1); err == nil {
		t.Error("RSS(-1) succeeded")
	}
}
