package daemon

import (
	"fmt"
	"strings"
)

// minAdminTokenLen keeps a guessable word out of ADMIN_TOKEN_FILE.
const minAdminTokenLen = 16

// adminSettings are the counters API's credentials (docs/counters.md): without either, the API is not served.
type adminSettings struct {
	// Token is ADMIN_TOKEN_FILE's content, read once at startup: a
	// rotated file needs a restart.
	Token []byte
	// ClientSANs is ADMIN_CLIENT_SAN, comma-separated: client certificate
	// names admitted over the gRPC port's mutual TLS.
	ClientSANs []string
}

func (s *settings) readAdmin(env *envReader) {
	if path, ok := env.raw("ADMIN_TOKEN_FILE"); ok {
		tok, err := readSecretFile(path)
		tok = strings.TrimSpace(tok)
		switch {
		case err != nil:
			// The error names the file, never its content.
			env.errs = append(env.errs, fmt.Errorf("ADMIN_TOKEN_FILE: %w", err))
		case len(tok) < minAdminTokenLen || strings.ContainsAny(tok, " \t"):
			env.errs = append(env.errs, fmt.Errorf("ADMIN_TOKEN_FILE %s: want one token of at least %d characters without spaces", path, minAdminTokenLen))
		default:
			s.Admin.Token = []byte(tok)
		}
	}
	v, ok := env.raw("ADMIN_CLIENT_SAN")
	if !ok {
		return
	}
	for san := range strings.SplitSeq(v, ",") {
		if san = strings.TrimSpace(san); san != "" {
			s.Admin.ClientSANs = append(s.Admin.ClientSANs, san)
		}
	}
	switch {
	case len(s.Admin.ClientSANs) == 0:
		env.fail("ADMIN_CLIENT_SAN", v, "one or more certificate names, comma-separated")
	case !s.GRPCTLS || s.GRPCClientCACert == "":
		env.errs = append(env.errs, fmt.Errorf("ADMIN_CLIENT_SAN needs mutual TLS on the gRPC port (GRPC_SERVER_USE_TLS=true and GRPC_CLIENT_TLS_CACERT)"))
	}
}
