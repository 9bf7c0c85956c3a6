package daemon

import (
	"net/url"
	"strings"

	"github.com/ratelimitd/ratelimitd/internal/redact"
)

// redactor masks the settings' secrets in everything the process prints:
// newLoggers puts it under every logger, and Run passes its exit error
// through it.
func (s settings) redactor() *redact.Redactor { return redact.New(s.secrets()...) }

// secrets are the settings' values no output may show: REDIS_AUTH (and the
// password of its user:password form), the password of every REDIS_URL
// (one per Sentinel or Cluster address), and the admin token.
func (s settings) secrets() []string {
	var out []string
	if s.RedisAuth != "" {
		out = append(out, s.RedisAuth)
		if _, pw, ok := strings.Cut(s.RedisAuth, ":"); ok {
			out = append(out, pw)
		}
	}
	for _, addr := range strings.Split(s.RedisURL, ",") {
		out = append(out, urlPassword(strings.TrimSpace(addr)))
	}
	return append(out, string(s.Admin.Token))
}

// urlPassword is addr's password, or its whole userinfo when addr is too
// malformed to parse but has one; "" without one. An address without a
// scheme (user:password@host:port) parses as the scheme "user" and an
// opaque rest, so it is read like a malformed one.
func urlPassword(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Opaque == "" {
		if u.User == nil {
			return ""
		}
		pw, _ := u.User.Password()
		return pw
	}
	at := strings.LastIndex(addr, "@")
	if at < 0 {
		return ""
	}
	userinfo := addr[:at]
	if i := strings.Index(userinfo, "://"); i >= 0 {
		userinfo = userinfo[i+3:]
	}
	if _, pw, ok := strings.Cut(userinfo, ":"); ok {
		return pw
	}
	return userinfo
}
