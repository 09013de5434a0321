package principal

import (
	"crypto/x509"
	"strings"
	"testing"
)

// TestFromCertificateRefusesSeveralCNs: without rules the principal is the
// subject's CN, and a subject with more than one CN does not say which one
// names the client. Go's parser keeps the last one, and within one RDN
// (CN=alice+CN=admin, a SET whose DER order is by encoding, not by the
// issuer's choice) that is whichever sorts last: a CA that checked one of
// the names and copied the other would have given another user's
// principal. Such a certificate is refused, naming the DN; rules (which
// see the whole DN) still map it.
func TestFromCertificateRefusesSeveralCNs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cert *x509.Certificate
	}{
		{"two RDNs", certificate(t, rdn(atv(oidO, "Org")), rdn(atv(oidCN, "zed")), rdn(atv(oidCN, "admin")))},
		{"one multi-valued RDN", certificate(t, rdn(atv(oidCN, "zed"), atv(oidCN, "admin")))},
		{"one multi-valued RDN, given in the other order", certificate(t, rdn(atv(oidCN, "admin"), atv(oidCN, "aaa")))},
	} {
		p, err := FromCertificate(tc.cert, nil)
		if err == nil {
			t.Errorf("%s: principal %q from a subject with two CNs; want a refusal", tc.name, p)
		} else if !strings.Contains(err.Error(), "CNs") {
			t.Errorf("%s: error %q does not say why", tc.name, err)
		}
		if p, err := FromCertificate(tc.cert, mustRules(t, "DEFAULT")); err != nil || !strings.HasPrefix(p, "User:CN=") {
			t.Errorf("%s with DEFAULT: %q, %v; want the whole DN", tc.name, p, err)
		}
	}
	one := certificate(t, rdn(atv(oidO, "Org")), rdn(atv(oidCN, "alice")))
	if p, err := FromCertificate(one, nil); err != nil || p != "User:alice" {
		t.Errorf("one CN: %q, %v", p, err)
	}
}
