package main

import (
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// TestTLSVerifyFailureSaysWhatToSet: a command whose TLS handshake fails on
// the node's certificate says which setting to fix, besides what Go's TLS
// said: the CA to trust (--tls-ca-file, ssl.ca.location) when the
// certificate's CA is not trusted, the address or --tls-server-name when
// the certificate does not hold the name connected to. Neither is retried.
func TestTLSVerifyFailureSaysWhatToSet(t *testing.T) {
	t.Parallel() // its own CAs and TLS server; no environment
	ca, other := testpki.NewCA(t, "node-ca"), testpki.NewCA(t, "other-ca")
	addr := testpki.ServeHandshakes(t, ca.Server(t, "node"))
	c := cli{t: t}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"another CA", []string{"--tls-ca-file", other.CertFile},
			[]string{"certificate signed by unknown authority", "--tls-ca-file", "ssl.ca.location"}},
		{"no CA at all", nil,
			[]string{"certificate signed by unknown authority", "--tls-ca-file", "ssl.ca.location"}},
		{"another name", []string{"--tls-ca-file", ca.CertFile, "--tls-server-name", "elsewhere.example"},
			[]string{"not elsewhere.example", "--tls-server-name", "--bootstrap"}},
	} {
		args := append([]string{"topics", "--bootstrap", addr, "--tls", "--timeout", "5s"}, tc.args...)
		_, errOut, code := c.run(args...)
		for _, want := range tc.want {
			if code != 1 || !strings.Contains(errOut, want) {
				t.Errorf("%s: exit %d, want 1 and an error saying %q:\n%s", tc.name, code, want, errOut)
			}
		}
	}
}
