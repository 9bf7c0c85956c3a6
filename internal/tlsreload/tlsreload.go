// Package tlsreload serves certificates, keys and CA bundles from disk and
// picks up rotated files (cert-manager, a renewed Kubernetes secret)
// without a restart.
//
// Files are not watched: a handshake checks their modification times and
// sizes at most once a second and reparses them only after a change. That
// follows Kubernetes' symlink swaps of secret volumes without an fsnotify
// watch per directory, and costs a stat per second at most.
package tlsreload

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// checkEvery bounds how often a handshake stats the files.
const checkEvery = time.Second

// Option configures a Pair or a Pool.
type Option func(*options)

type options struct {
	now     func() time.Time
	onError func(error)
}

// WithClock sets the clock that spaces the checks (tests step a fake one).
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// OnReloadError receives a failed reload after a change (a half-written
// rotation, a key that does not match); the previous value keeps being
// served. It is called once per change of the files, not per handshake.
func OnReloadError(fn func(error)) Option {
	return func(o *options) { o.onError = fn }
}

// source is a value parsed from files, reparsed when they change.
type source[T any] struct {
	files []string
	parse func() (T, error)
	options

	mu      sync.Mutex
	val     T
	stamps  []fileStamp // of the files val was parsed from
	failed  []fileStamp // of the files that last failed to parse
	checked time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func newSource[T any](files []string, parse func() (T, error), opts []Option) (*source[T], error) {
	s := &source[T]{files: files, parse: parse, options: options{now: time.Now}}
	for _, opt := range opts {
		opt(&s.options)
	}
	stamps, err := s.stat()
	if err != nil {
		return nil, err
	}
	if s.val, err = parse(); err != nil {
		return nil, err
	}
	s.stamps, s.checked = stamps, s.now()
	return s, nil
}

// get returns the current value, reparsing the files first if they changed
// and the last check is a second old.
func (s *source[T]) get() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.checked) < checkEvery {
		return s.val
	}
	s.checked = now
	stamps, err := s.stat()
	if err != nil || slices.Equal(stamps, s.stamps) || slices.Equal(stamps, s.failed) {
		// A file missing mid-rotation: keep serving, look again later.
		return s.val
	}
	val, err := s.parse()
	if err != nil {
		s.failed = stamps
		if s.onError != nil {
			s.onError(err)
		}
		return s.val
	}
	s.val, s.stamps, s.failed = val, stamps, nil
	return s.val
}

func (s *source[T]) stat() ([]fileStamp, error) {
	stamps := make([]fileStamp, len(s.files))
	for i, f := range s.files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		stamps[i] = fileStamp{st.ModTime(), st.Size()}
	}
	return stamps, nil
}
