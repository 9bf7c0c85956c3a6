package config

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// Watcher keeps the current Config of a directory, reloading it when the
// directory (or the watched runtime root) changes or when asked to. A failed
// reload keeps the previous Config.
type Watcher struct {
	dir       string
	watchPath string
	opts      watcherOptions
	load      options
	current   atomic.Pointer[Config]

	mu     sync.Mutex        // serializes reloads; guards digest
	digest [sha256.Size]byte // of what the last load attempt read
}

// NewWatcher loads dir once; an initial failure is returned (the caller
// decides whether to start without a config). Run starts watching.
func NewWatcher(dir string, opts ...WatcherOption) (*Watcher, error) {
	o := watcherOptions{log: zap.NewNop(), debounce: DefaultDebounce}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	w := &Watcher{
		dir:       absPath(dir),
		watchPath: absPath(dir),
		opts:      o,
		load:      buildOptions(o.load),
	}
	if o.watchPath != "" {
		w.watchPath = absPath(o.watchPath)
	}
	files, readErr := readDir(w.dir, w.load)
	w.digest = fingerprint(files, readErr)
	cfg, err := w.parse(files, readErr)
	if err != nil {
		if !o.startWithoutConfig {
			// err names the directory or each bad file already.
			return nil, fmt.Errorf("config: initial load: %w", err)
		}
		w.opts.log.Error("no valid config yet; starting without one", zap.String("dir", w.dir), zap.Error(err))
		return w, nil
	}
	w.current.Store(cfg)
	w.opts.log.Info("config loaded", zap.String("dir", w.dir), zap.Strings("domains", cfg.Domains()))
	return w, nil
}

// Current is the config in force; nil only while a watcher started
// WithStartWithoutConfig has not loaded a valid one yet.
func (w *Watcher) Current() *Config {
	return w.current.Load()
}

// Reload loads the directory now (SIGHUP). On error the previous config
// stays, the error is logged once and returned.
func (w *Watcher) Reload() error {
	return w.reload(true)
}

// reload loads and swaps in the directory's config. Unless forced, it skips
// content it has already tried, so that repeated events for the same bytes
// neither reload nor log the same error again.
func (w *Watcher) reload(force bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	files, readErr := readDir(w.dir, w.load)
	digest := fingerprint(files, readErr)
	if !force && digest == w.digest {
		return nil
	}
	w.digest = digest
	cfg, err := w.parse(files, readErr)
	if err != nil {
		w.opts.log.Error("config reload failed; keeping the previous config", zap.String("dir", w.dir), zap.Error(err))
	} else {
		w.current.Store(cfg)
		w.opts.log.Info("config reloaded", zap.String("dir", w.dir), zap.Strings("domains", cfg.Domains()))
	}
	if w.opts.onReload != nil {
		w.opts.onReload(cfg, err)
	}
	return err
}

func (w *Watcher) parse(files []File, readErr error) (*Config, error) {
	cfg, err := Parse(files, w.opts.load...)
	if err = errors.Join(readErr, err); err != nil {
		return nil, err
	}
	return cfg, nil
}

// fingerprint identifies what a load read, errors included, so that an
// unchanged directory is recognised without parsing it.
func fingerprint(files []File, readErr error) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		for _, b := range [][]byte{[]byte(f.Name), f.Data} {
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			h.Write(n[:])
			h.Write(b)
		}
	}
	if readErr != nil {
		h.Write([]byte(readErr.Error()))
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Run watches until ctx is done, reloading after each burst of changes.
// It watches the config directory, the watch path and the watch path's
// parent: a symlink swap shows up only in the parent, and after a swap the
// watches are renewed because they follow the old target.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", w.watchPath, err)
	}
	defer fw.Close()
	w.rewatch(fw)
	// Catch changes made between NewWatcher and the watches above.
	_ = w.reload(false)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("config: file watcher closed")
			}
			if !w.relevant(ev.Name) {
				continue
			}
			w.opts.log.Debug("config change", zap.String("path", ev.Name), zap.Stringer("op", ev.Op))
			if w.opts.debounce == 0 {
				w.rewatch(fw)
				_ = w.reload(false)
				continue
			}
			timer.Reset(w.opts.debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("config: file watcher closed")
			}
			w.opts.log.Warn("config watch error", zap.Error(err))
		case <-timer.C:
			w.rewatch(fw)
			_ = w.reload(false)
		}
	}
}

func (w *Watcher) watched() []string {
	paths := []string{filepath.Dir(w.watchPath), w.watchPath}
	if w.dir != w.watchPath {
		paths = append(paths, w.dir)
	}
	return paths
}

// relevant keeps events about the watch path itself (from its parent's
// watch) and about anything inside the watch path or the config directory.
func (w *Watcher) relevant(name string) bool {
	name = filepath.Clean(name)
	parent := filepath.Dir(name)
	return name == w.watchPath || parent == w.watchPath || parent == w.dir
}

// rewatch renews every watch. A path that does not exist right now is
// skipped with a warning: if it comes back through the watch path, the
// parent's watch reports it.
func (w *Watcher) rewatch(fw *fsnotify.Watcher) {
	for _, p := range w.watched() {
		_ = fw.Remove(p) // not watched, or its target is gone: nothing to undo
		if err := fw.Add(p); err != nil {
			w.opts.log.Warn("config path not watched", zap.String("path", p), zap.Error(err))
		}
	}
}

// absPath makes event names, which fsnotify derives from the watched
// paths, comparable with the configured ones.
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}
