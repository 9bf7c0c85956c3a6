package daemon

import (
	"fmt"
	"strings"

	"github.com/ratelimitd/ratelimitd/internal/xdsconfig"
)

// xdsSettings are envoyproxy's CONFIG_TYPE=GRPC_XDS_SOTW settings, with its
// names and defaults.
type xdsSettings struct {
	Enabled      bool
	ServerURL    string
	NodeID       string
	NodeMetadata map[string]string
	Headers      map[string]string
	UseTLS       bool
	TLS          xdsconfig.TLSFiles
	Backoff      xdsconfig.Backoff
}

// readXDS reads CONFIG_TYPE and, for GRPC_XDS_SOTW, the CONFIG_GRPC_XDS_*
// and XDS_CLIENT_BACKOFF_* settings; with files they stay zero.
func (s *settings) readXDS(env *envReader) {
	if env.oneOf("CONFIG_TYPE", "FILE", "FILE", "GRPC_XDS_SOTW") != "GRPC_XDS_SOTW" {
		return
	}
	x := &s.XDS
	x.Enabled = true
	x.ServerURL = env.str("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000")
	x.NodeID = env.str("CONFIG_GRPC_XDS_NODE_ID", "default")
	x.NodeMetadata = env.pairs("CONFIG_GRPC_XDS_NODE_METADATA")
	x.Headers = env.pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS")
	x.UseTLS = env.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false)
	x.TLS = xdsconfig.TLSFiles{
		CertFile:   env.str("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""),
		KeyFile:    env.str("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ""),
		CAFile:     env.str("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""),
		ServerName: env.str("CONFIG_GRPC_XDS_SERVER_TLS_SAN", ""),
	}
	d := xdsconfig.DefaultBackoff
	x.Backoff = xdsconfig.Backoff{
		Initial:      env.duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", d.Initial),
		Max:          env.duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", d.Max),
		RandomFactor: env.fraction("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", d.RandomFactor),
		Jitter:       env.boolean("XDS_CLIENT_BACKOFF_JITTER", d.Jitter),
	}
	if x.Backoff.Initial <= 0 || x.Backoff.Max < x.Backoff.Initial {
		env.fail("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", x.Backoff.Initial.String(),
			"a positive duration no longer than XDS_CLIENT_BACKOFF_MAX_INTERVAL ("+x.Backoff.Max.String()+")")
	}
	// envoyproxy's older reconnect setting: its newer releases, and this
	// one, space reconnections with XDS_CLIENT_BACKOFF_* instead.
	if v, ok := env.raw("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"); ok {
		s.Warnings = append(s.Warnings, fmt.Sprintf("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=%s has no effect; XDS_CLIENT_BACKOFF_INITIAL_INTERVAL and XDS_CLIENT_BACKOFF_MAX_INTERVAL space reconnections", v))
	}
}

// pairs reads envoyproxy's map syntax, "k1:v1,k2:v2"; "k=v" is accepted as
// well because envoyproxy documents node metadata that way.
func (r *envReader) pairs(name string) map[string]string {
	v, ok := r.raw(name)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, val, found := strings.Cut(item, ":")
		if eq := strings.IndexByte(item, '='); eq >= 0 && (!found || eq < len(k)) {
			k, val, found = item[:eq], item[eq+1:], true
		}
		k = strings.TrimSpace(k)
		if !found || k == "" {
			r.fail(name, v, `comma-separated key:value pairs, e.g. "k1:v1,k2:v2"`)
			return nil
		}
		out[k] = strings.TrimSpace(val)
	}
	return out
}
