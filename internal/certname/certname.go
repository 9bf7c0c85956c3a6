// Package certname matches a client certificate against a configured name,
// for GRPC_CLIENT_TLS_SAN and the counters API's ADMIN_CLIENT_SAN alike.
package certname

import (
	"crypto/x509"
	"slices"
)

// Has says whether c carries san. envoyproxy verifies it as a host name
// (DNS names, wildcards included, or an IP address); URI SANs (SPIFFE
// identities) and email addresses are matched exactly as well.
func Has(c *x509.Certificate, san string) bool {
	if c.VerifyHostname(san) == nil || slices.Contains(c.EmailAddresses, san) {
		return true
	}
	for _, u := range c.URIs {
		if u.String() == san {
			return true
		}
	}
	return false
}
