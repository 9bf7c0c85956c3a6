package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// envReader reads typed settings from the environment, collecting every bad
// value so that one failed start reports all of them, each by its variable.
type envReader struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (r *envReader) raw(name string) (string, bool) {
	v, ok := r.lookup(name)
	if !ok {
		return "", false
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}

func (r *envReader) fail(name, value, want string) {
	r.errs = append(r.errs, fmt.Errorf("%s=%q: want %s", name, value, want))
}

func (r *envReader) err() error {
	return errors.Join(r.errs...)
}

func (r *envReader) str(name, def string) string {
	if v, ok := r.raw(name); ok {
		return v
	}
	return def
}

func (r *envReader) boolean(name string, def bool) bool {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "true or false")
		return def
	}
	return b
}

func (r *envReader) integer(name string, def, lo, hi int) int {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		r.fail(name, v, fmt.Sprintf("an integer between %d and %d", lo, hi))
		return def
	}
	return n
}

func (r *envReader) duration(name string, def time.Duration) time.Duration {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, `a non-negative Go duration such as "500ms" or "10s"`)
		return def
	}
	return d
}

// oneOf returns the allowed value v matches case-insensitively, in the
// spelling of allowed.
func (r *envReader) oneOf(name, def string, allowed ...string) string {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	if i := slices.IndexFunc(allowed, func(a string) bool { return strings.EqualFold(a, v) }); i >= 0 {
		return allowed[i]
	}
	r.fail(name, v, "one of "+strings.Join(allowed, ", "))
	return def
}

func (r *envReader) fraction(name string, def float64) float64 {
	v, ok := r.raw(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		r.fail(name, v, "a number from 0 to 1")
		return def
	}
	return f
}
