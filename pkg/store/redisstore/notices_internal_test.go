package redisstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// heldPublisher records each round trip of notices and holds the first
// until released.
type heldPublisher struct {
	mu      sync.Mutex
	batches [][]string
	started chan struct{}
	release chan struct{}
}

func (p *heldPublisher) publish(_ context.Context, keys []string) error {
	p.mu.Lock()
	p.batches = append(p.batches, slices.Clone(keys))
	first := len(p.batches) == 1
	p.mu.Unlock()
	if first {
		close(p.started)
		<-p.release
	}
	return nil
}

// While one round trip is in flight, the keys that come wait for the next,
// each once however often it came, up to the bound (past it: a failure);
// stop sends what waits, and nothing is sent after it.
func TestNoticesCoalesce(t *testing.T) {
	p := &heldPublisher{started: make(chan struct{}), release: make(chan struct{})}
	var mu sync.Mutex
	var failures []error
	n := &notices{publish: p.publish, timeout: time.Second, max: 3, pending: map[string]struct{}{},
		failed: func(op string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if op == "publish" {
				failures = append(failures, err)
			}
		}}
	n.add([]string{"a"})
	<-p.started
	for range 100 {
		n.add([]string{"b", "a", "b"})
	}
	n.add([]string{"c", "d", "e"}) // d and e past the bound of 3
	close(p.release)
	n.stop()
	n.add([]string{"f"})
	want := [][]string{{"a"}, {"b", "a", "c"}}
	if !slices.EqualFunc(p.batches, want, slices.Equal[[]string]) {
		t.Errorf("round trips %q, want %q", p.batches, want)
	}
	if len(failures) != 1 || !errors.Is(failures[0], errNoticesFull) {
		t.Errorf("failures %v, want one: the keys past the bound dropped", failures)
	}
}
