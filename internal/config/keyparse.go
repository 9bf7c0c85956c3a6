package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/pkg/algorithms"
)

// DomainPrefix is the text every key of domain's counters starts with
// (the escaped prefix, the brace and the escaped domain with the colon that
// ends it), so a store can list one domain's counters by prefix. The domain
// is escaped with its ':', so no other domain's keys share this prefix.
func (b KeyBuilder) DomainPrefix(domain string) string {
	var sb strings.Builder
	writeEscaped(&sb, b.Prefix, false)
	sb.WriteByte('{')
	writeEscaped(&sb, domain, true)
	sb.WriteByte(':')
	return sb.String()
}

// ParsedKey is what a counter's key says: the inverse of KeyBuilder.Key.
type ParsedKey struct {
	Domain  string
	Entries []Entry
	// Shared[i] says Entries[i].Value is a share_threshold wildcard's
	// pattern, not a request value.
	Shared []bool
	// Algorithm is the algorithm's name (the key's own text where no
	// algorithm's KeyName is that: a key of another release).
	Algorithm string
	Period    time.Duration
	// Calendar: the period is Period/algorithms.Month calendar months.
	Calendar bool
}

var errKeySyntax = errors.New("not a counter key")

// ParseKey reads a key KeyBuilder.Key built with the same Prefix, so that
// a listing can show which descriptor each counter belongs to.
func (b KeyBuilder) ParseKey(key string) (ParsedKey, error) {
	var pk ParsedKey
	var sb strings.Builder
	writeEscaped(&sb, b.Prefix, false)
	rest, ok := strings.CutPrefix(key, sb.String()+"{")
	if !ok {
		return pk, fmt.Errorf("%q: %w: no prefix %q", key, errKeySyntax, b.Prefix)
	}
	domain, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return pk, fmt.Errorf("%q: %w: no domain", key, errKeySyntax)
	}
	var err error
	if pk.Domain, _, err = unescape(domain, -1); err != nil {
		return pk, fmt.Errorf("%q: %w", key, err)
	}
	for {
		var e Entry
		var shared bool
		if e.Key, rest, err = readField(rest); err != nil {
			return pk, fmt.Errorf("%q: entry %d key: %w", key, len(pk.Entries), err)
		}
		if rest, ok = strings.CutPrefix(rest, ":"); !ok {
			return pk, fmt.Errorf("%q: entry %d: %w: no value", key, len(pk.Entries), errKeySyntax)
		}
		rest, shared = strings.CutPrefix(rest, "*")
		if e.Value, rest, err = readField(rest); err != nil {
			return pk, fmt.Errorf("%q: entry %d value: %w", key, len(pk.Entries), err)
		}
		pk.Entries, pk.Shared = append(pk.Entries, e), append(pk.Shared, shared)
		if rest, ok = strings.CutPrefix(rest, ":"); !ok {
			break
		}
	}
	if pk.Algorithm, pk.Period, pk.Calendar, err = parseSuffix(rest); err != nil {
		return pk, fmt.Errorf("%q: %w", key, err)
	}
	for _, a := range algorithms.All() {
		// A key names its algorithm by Info.KeyName (fixed_window.int).
		if a.Info().KeyName == pk.Algorithm {
			pk.Algorithm = a.String()
			break
		}
	}
	return pk, nil
}

// readField reads "len:escaped" where len is the unescaped length.
func readField(s string) (string, string, error) {
	digits, rest, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || n < 0 {
		return "", "", fmt.Errorf("%w: bad length %q", errKeySyntax, digits)
	}
	return unescape(rest, n)
}

// unescape reads n unescaped bytes from s (all of s when n < 0) and
// returns them with what follows.
func unescape(s string, n int) (string, string, error) {
	var sb strings.Builder
	i := 0
	for ; i < len(s) && (n < 0 || sb.Len() < n); i++ {
		if s[i] != '%' {
			sb.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", "", fmt.Errorf("%w: truncated escape", errKeySyntax)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", "", fmt.Errorf("%w: bad escape %q", errKeySyntax, s[i:i+3])
		}
		sb.WriteByte(byte(v))
		i += 2
	}
	if n >= 0 && sb.Len() < n {
		return "", "", fmt.Errorf("%w: field shorter than its length %d", errKeySyntax, n)
	}
	return sb.String(), s[i:], nil
}

// parseSuffix reads "}:algorithm:period" (see writePeriod; "3mo" is three
// calendar months).
func parseSuffix(s string) (alg string, period time.Duration, calendar bool, err error) {
	rest, ok := strings.CutPrefix(s, "}:")
	alg, spelled, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || alg == "" {
		return "", 0, false, fmt.Errorf("%w: bad suffix %q", errKeySyntax, s)
	}
	unit := time.Second
	digits, isSec := strings.CutSuffix(spelled, "s")
	if d, isMicro := strings.CutSuffix(spelled, "us"); isMicro {
		digits, unit = d, time.Microsecond
	} else if d, isMonths := strings.CutSuffix(spelled, "mo"); isMonths {
		digits, unit, calendar = d, algorithms.Month, true
	} else if !isSec {
		return "", 0, false, fmt.Errorf("%w: bad period %q", errKeySyntax, spelled)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 || n > int64(algorithms.MaxPeriod/unit) {
		return "", 0, false, fmt.Errorf("%w: bad period %q", errKeySyntax, spelled)
	}
	return alg, time.Duration(n) * unit, calendar, nil
}
