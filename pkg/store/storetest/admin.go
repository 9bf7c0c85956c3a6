package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
	"github.com/ratelimitd/ratelimitd/pkg/store"
)

// Admin is a store with the counters API's capabilities.
type Admin = store.Admin

// AdminFactory is Factory for stores with the counters API's capabilities.
type AdminFactory func(t *testing.T, clock *Clock) Admin

// RunAdmin checks Reset and List. exactPages says a page never holds more
// than the count asked for (Redis SCAN may return a little more).
func RunAdmin(t *testing.T, newStore AdminFactory, exactPages bool) {
	t.Run("reset", func(t *testing.T) { testReset(t, newStore) })
	t.Run("list", func(t *testing.T) { testList(t, newStore, exactPages) })
	t.Run("list_bad_cursor", func(t *testing.T) {
		s := newStore(t, NewClock(Epoch()))
		t.Cleanup(func() { _ = s.Close() })
		for _, c := range []string{"garbage", "99999:x", "[", `[{"a":"x","c":"y"}]`} {
			if _, _, err := s.List(t.Context(), "p", c, 10, time.Now().Add(time.Second)); !errors.Is(err, store.ErrBadCursor) {
				t.Errorf("List with cursor %q: %v, want ErrBadCursor", c, err)
			}
		}
	})
}

func testReset(t *testing.T, newStore AdminFactory) {
	clock := NewClock(Epoch())
	s := newStore(t, clock)
	t.Cleanup(func() { _ = s.Close() })
	win := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
	log := algorithms.Limit{Algorithm: algorithms.SlidingLog, Requests: 5, Period: time.Minute}
	// Keys in different Cluster slots.
	a, b, l := "{d:1:k:1:a}:fixed_window:60s", "{d:1:k:1:b}:fixed_window:60s", "{d:1:k:1:c}:sliding_log:60s"
	for range 3 {
		mustAdminTake(t, s, req(a, win, 1), req(b, win, 1), req(l, log, 1))
	}
	existed, err := s.Reset(t.Context(), []string{a, l, "{d:1:k:7:missing}:fixed_window:60s"})
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if fmt.Sprint(existed) != "[true true false]" {
		t.Errorf("Reset existed = %v, want [true true false]", existed)
	}
	got := mustAdminTake(t, s, req(a, win, 0), req(b, win, 0), req(l, log, 0))
	for i, want := range []uint64{5, 2, 5} {
		if got[i].Remaining != want {
			t.Errorf("after the reset, key %d has %d left, want %d", i, got[i].Remaining, want)
		}
	}
	if existed, err = s.Reset(t.Context(), []string{a}); err != nil || existed[0] {
		t.Errorf("second Reset of %q: %v, %v; want not existed", a, existed, err)
	}
}

func mustAdminTake(t *testing.T, s store.Store, reqs ...store.Request) []store.Result {
	t.Helper()
	res, err := s.Take(t.Context(), reqs)
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	return res
}

func testList(t *testing.T, newStore AdminFactory, exactPages bool) {
	s := newStore(t, NewClock(Epoch()))
	t.Cleanup(func() { _ = s.Close() })
	// Glob characters in the prefix must match only themselves on Redis.
	prefix := `p*[x]?\{dom:`
	want := fillForList(t, s, prefix)
	got := map[string]bool{}
	cursor, pages := "", 0
	for {
		keys, next, err := s.List(t.Context(), prefix, cursor, 7, time.Now().Add(time.Second))
		if err != nil {
			t.Fatalf("List page %d: %v", pages, err)
		}
		if exactPages && len(keys) > 7 {
			t.Errorf("page %d holds %d keys, more than the 7 asked for", pages, len(keys))
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				t.Errorf("page %d lists %q, not under %q", pages, k, prefix)
			}
			got[k] = true
		}
		pages++
		if next == "" {
			break
		}
		if pages > 1000 {
			t.Fatal("the listing does not end")
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Errorf("listed %d distinct keys over %d pages, want %d", len(got), pages, len(want))
	}
	for k := range want {
		if !got[k] {
			t.Errorf("%q not listed", k)
		}
	}
	// A time bound already passed still makes progress: one step at least.
	if keys, next, err := s.List(t.Context(), prefix, "", 1000, time.Now().Add(-time.Second)); err != nil || (len(keys) == 0 && next == "") {
		t.Errorf("List past its time bound: %d keys, next %q, %v", len(keys), next, err)
	}
}

// fillForList charges 250 keys under prefix and 500 that only look alike:
// another domain, and the prefix's glob read as a pattern.
func fillForList(t *testing.T, s store.Store, prefix string) map[string]bool {
	t.Helper()
	win := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
	want := map[string]bool{}
	var batch []store.Request
	for i := range 250 {
		k := fmt.Sprintf("%s1:k:%d:v%d}:fixed_window:60s", prefix, len(fmt.Sprint(i))+1, i)
		want[k] = true
		batch = append(batch, req(k, win, 1))
		// Keys that only look alike: another domain, the prefix's glob read.
		batch = append(batch, req(fmt.Sprintf(`p*[x]?\{dom2:1:k:%d}:fixed_window:60s`, i), win, 1))
		batch = append(batch, req(fmt.Sprintf(`pa[x]?\{dom:1:k:%d}:fixed_window:60s`, i), win, 1))
		if len(batch) >= 60 {
			mustAdminTake(t, s, batch...)
			batch = batch[:0]
		}
	}
	mustAdminTake(t, s, batch...)
	return want
}
