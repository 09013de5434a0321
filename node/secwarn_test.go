package node

import (
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/principal"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
)

// TestSecurityWarnings: a node warns at start about PLAIN on a
// SASL_PLAINTEXT listener other hosts can reach (passwords in clear), and
// about a super user that any client certificate of the trusted CAs can
// claim by its CN alone; not on loopback, with SASL_SSL, with principal
// rules, or for a DN-shaped super user.
func TestSecurityWarnings(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	p := ca.Server(t, "server")
	mtls, err := tlsconfig.New(tlsconfig.Options{CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: ca.CertFile, ClientAuth: tlsconfig.ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := principal.ParseRules("DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	l := func(proto, addr string) server.Listener { return server.Listener{Protocol: proto, Addr: addr} }
	for _, tc := range []struct {
		name      string
		listeners []server.Listener
		sec       SecurityConfig
		want      []string // substrings, one per warning
	}{
		{"PLAIN on SASL_PLAINTEXT, all addresses", []server.Listener{l(server.ProtocolSASLPlaintext, "0.0.0.0:9092")},
			SecurityConfig{Mechanisms: []string{"SCRAM-SHA-512", "PLAIN"}}, []string{"PLAIN is enabled on the SASL_PLAINTEXT listener 0.0.0.0:9092"}},
		{"PLAIN on SASL_PLAINTEXT, loopback", []server.Listener{l(server.ProtocolSASLPlaintext, "127.0.0.1:9092")},
			SecurityConfig{Mechanisms: []string{"PLAIN"}}, nil},
		{"PLAIN on SASL_SSL", []server.Listener{l(server.ProtocolSASLSSL, "10.0.0.1:9093")},
			SecurityConfig{Mechanisms: []string{"PLAIN"}, TLS: mtls}, nil},
		{"SCRAM on SASL_PLAINTEXT", []server.Listener{l(server.ProtocolSASLPlaintext, "10.0.0.1:9092")},
			SecurityConfig{Mechanisms: []string{"SCRAM-SHA-256"}}, nil},
		{"super user by CN", []server.Listener{l(server.ProtocolSSL, "10.0.0.1:9094")},
			SecurityConfig{TLS: mtls, SuperUsers: []string{"User:admin", "User:CN=ops,O=corp"}}, []string{`super user User:admin can be claimed by any client certificate from the trusted CAs whose CN is "admin"`}},
		{"super user with rules", []server.Listener{l(server.ProtocolSSL, "10.0.0.1:9094")},
			SecurityConfig{TLS: mtls, PrincipalRules: rules, SuperUsers: []string{"User:admin"}}, nil},
		{"super user, no SSL listener", []server.Listener{l(server.ProtocolSASLSSL, "10.0.0.1:9093")},
			SecurityConfig{TLS: mtls, SuperUsers: []string{"User:admin"}}, nil},
	} {
		got := tc.sec.Warnings(tc.listeners)
		if len(got) != len(tc.want) {
			t.Errorf("%s: warnings %q, want %d", tc.name, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: warning %q, want it to contain %q", tc.name, got[i], w)
			}
		}
	}
}
