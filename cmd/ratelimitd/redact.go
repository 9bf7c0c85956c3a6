package main

import (
	"net/url"
	"strings"
)

// redactURL hides passwords in REDIS_URL (which may be a comma-separated
// Sentinel or Cluster list) before it reaches a log line or an error.
func redactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		if !strings.Contains(p, "@") {
			continue
		}
		u, err := url.Parse(p)
		if err != nil || u.User == nil {
			// Unparseable but holding userinfo: keep only what follows it.
			parts[i] = "xxxxx@" + p[strings.LastIndex(p, "@")+1:]
			continue
		}
		if _, has := u.User.Password(); has {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// redactSecrets removes every Redis credential of set from msg: a client
// library error may quote the address or the URL it failed on.
func redactSecrets(msg string, set settings) string {
	var secrets []string
	if set.RedisAuth != "" {
		secrets = append(secrets, set.RedisAuth)
		if _, pw, ok := strings.Cut(set.RedisAuth, ":"); ok && pw != "" {
			secrets = append(secrets, pw)
		}
	}
	for _, p := range strings.Split(set.RedisURL, ",") {
		if u, err := url.Parse(p); err == nil && u.User != nil {
			if pw, has := u.User.Password(); has && pw != "" {
				secrets = append(secrets, pw, url.QueryEscape(pw))
			}
		} else if at := strings.LastIndex(p, "@"); at >= 0 {
			secrets = append(secrets, p[:at])
		}
	}
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}
