package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadDir parses the *.yaml and *.yml files directly in dir (not in
// subdirectories), in name order. Symlinks are followed, so a Kubernetes
// ConfigMap mount works. With WithIgnoreDotfiles, names starting with a dot
// are skipped. An empty directory is an empty, valid Config.
func LoadDir(dir string, opts ...Option) (*Config, error) {
	files, readErr := readDir(dir, buildOptions(opts))
	cfg, err := Parse(files, opts...)
	if err = errors.Join(readErr, err); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readDir returns the readable config files of dir and an error for every
// one it could not read, so that LoadDir reports all bad files at once.
func readDir(dir string, o options) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		// Named once, here: the PathError's "open dir" would repeat it. No
		// package prefix either, like the located errors of the files: the
		// callers that need one (NewWatcher) add it.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("read directory %s: %w", dir, err)
	}
	var files []File
	var errs []error
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		if !isConfigName(name) || (o.ignoreDotfiles && strings.HasPrefix(name, ".")) {
			continue
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil {
			errs = append(errs, unreadable(path, err))
			continue
		}
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, unreadable(path, err))
			continue
		}
		files = append(files, File{Name: path, Data: data})
	}
	return files, errors.Join(errs...)
}

func isConfigName(name string) bool {
	ext := filepath.Ext(name)
	return ext == ".yaml" || ext == ".yml"
}

func unreadable(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &Error{File: path, Msg: "unreadable: " + err.Error()}
}
