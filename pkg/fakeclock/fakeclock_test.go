package fakeclock_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/fakeclock"
)

var t0 = time.Unix(1_800_000_000, 0)

// Timers run when the clock moves past them, in the order they fall due
// (creation order for the same time), each reading its own time; a stopped
// timer never runs, and Stop says whether it stopped one.
func TestTimers(t *testing.T) {
	c := fakeclock.New(t0)
	var ran []string
	at := map[string]time.Duration{}
	add := func(name string, d time.Duration) *fakeclock.Timer {
		return c.AfterFunc(d, func() {
			ran = append(ran, name)
			at[name] = c.Now().Sub(t0)
		})
	}
	add("c", 3*time.Second)
	add("a", time.Second)
	add("b", 3*time.Second)
	stopped := add("x", 2*time.Second)
	add("now", -time.Second) // a negative d is due at once
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending timer: want true once, then false")
	}
	c.Advance(500 * time.Millisecond)
	if !slices.Equal(ran, []string{"now"}) {
		t.Fatalf("after 0.5 s ran %v, want [now]", ran)
	}
	c.Advance(2500 * time.Millisecond)
	if !slices.Equal(ran, []string{"now", "a", "c", "b"}) {
		t.Fatalf("after 3 s ran %v, want [now a c b]", ran)
	}
	want := map[string]time.Duration{"now": 0, "a": time.Second, "b": 3 * time.Second, "c": 3 * time.Second}
	for name, d := range want {
		if at[name] != d {
			t.Errorf("timer %s read the clock at +%s, want +%s", name, at[name], d)
		}
	}
	if got := c.Now().Sub(t0); got != 3*time.Second {
		t.Errorf("clock at +%s after the timers, want +3s", got)
	}
	late := add("late", time.Second)
	c.Set(t0.Add(10 * time.Second))
	if ran[len(ran)-1] != "late" || late.Stop() {
		t.Errorf("Set past a timer: ran %v, Stop after it ran must be false", ran)
	}
}

// A timer may schedule another; one due within the same Advance runs in it.
func TestTimerSchedulesTimer(t *testing.T) {
	c := fakeclock.New(t0)
	n := 0
	var tick func()
	tick = func() {
		n++
		c.AfterFunc(time.Second, tick)
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(5 * time.Second)
	if n != 5 {
		t.Fatalf("a 1 s timer rescheduling itself ran %d times in 5 s, want 5", n)
	}
}

// Now, Advance and AfterFunc from several goroutines (go test -race).
func TestConcurrentUse(t *testing.T) {
	c := fakeclock.New(t0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				c.AfterFunc(time.Millisecond, func() { _ = c.Now() }).Stop()
				c.Advance(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if got := c.Now().Sub(t0); got != 400*time.Millisecond {
		t.Fatalf("clock at +%s after 400 steps of 1 ms", got)
	}
}
