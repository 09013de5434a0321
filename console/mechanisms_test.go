package console

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/sasl"
)

// TestConsoleOnPlainOnlyNode: on a node whose SASL listener enables PLAIN
// and no SCRAM, the console logs in with PLAIN over its in-memory
// connection: a right password is served, a wrong one is a 401. Before, it
// tried only SCRAM, which the node refused (UNSUPPORTED_SASL_MECHANISM),
// and answered every password, right or wrong, with a 401.
func TestConsoleOnPlainOnlyNode(t *testing.T) {
	n := startNode(t, true, func(c *node.Config) { c.Security.Mechanisms = []string{sasl.Plain} })
	base := "http://" + n.HTTPAddr() + "/console/"
	before := authCounts(t, n.HTTPAddr())
	if code, body := get(t, base+"topics", "admin", adminPassword); code != http.StatusOK {
		t.Fatalf("right password: %d %s", code, body)
	}
	after := authCounts(t, n.HTTPAddr())
	if after["PLAIN success"] <= before["PLAIN success"] || after["PLAIN failure"] != before["PLAIN failure"] {
		t.Errorf("a right password: PLAIN counts before %v, after %v; want successes and no failure", before, after)
	}
	if code, _ := get(t, base+"topics", "admin", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", code)
	}
	// PLAIN carries the password itself: it is never sent to another node
	// over TCP without TLS. (This node, seen as another one: its
	// advertised address is not taken for its own.)
	c := New(notSelf{n}, nil, nil)
	w := serveAs(c, "127.0.0.1:9100", false, "admin", adminPassword)
	if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "PLAIN password") {
		t.Errorf("PLAIN to another node over TCP: %d, want 502 saying why\n%s", w.Code, w.Body)
	}
}

// notSelf is a node that takes none of its addresses for its own, so the
// console dials them over TCP as it dials other nodes.
type notSelf struct{ *node.Node }

func (notSelf) SelfAddrs() []string { return nil }

// TestConsoleOnNodeWithoutPasswordMechanism: a node whose SASL listener
// enables only OAUTHBEARER answers the console with a 403 saying why; it
// answered 401 to every password, as if the password were wrong.
func TestConsoleOnNodeWithoutPasswordMechanism(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := fmt.Sprintf(`{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":%q,"e":"AQAB"}]}`,
		base64.RawURLEncoding.EncodeToString(key.N.Bytes()))
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, []byte(jwks), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, true, func(c *node.Config) {
		c.Security.Mechanisms = []string{sasl.OAuthBearer}
		c.Security.OAuth.JWKSFile = path
	})
	for _, pass := range []string{adminPassword, ""} {
		code, body := get(t, "http://"+n.HTTPAddr()+"/console/", "admin", pass)
		if code != http.StatusForbidden || !strings.Contains(body, "no password mechanism") {
			t.Errorf("password %q: %d, want 403 saying the node has no password mechanism\n%s", pass, code, body)
		}
	}
}

// TestLoginOrder: the console tries every password mechanism the node
// enables, so that a user whose credential is of a SCRAM mechanism the node
// does not enable still logs in through PLAIN (it checks the same stored
// credentials), and first for such a user, so that the right password counts
// no failure; the SCRAM mechanisms the user holds come first otherwise.
func TestLoginOrder(t *testing.T) {
	names := func(ms []kgosasl.Mechanism) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.Name())
		}
		return strings.Join(s, ",")
	}
	const s512, s256, pl = "SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"
	for _, tc := range []struct {
		held, enabled []string
		want          string
	}{
		{[]string{s512}, []string{s256, pl}, "PLAIN,SCRAM-SHA-256"},                           // its credential's mechanism is off
		{nil, []string{s256, pl}, "SCRAM-SHA-256,PLAIN"},                                      // unknown user: every mechanism
		{[]string{s512, s256}, []string{s512, s256, pl}, "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"}, // held first
		{[]string{s256}, []string{s512, s256}, "SCRAM-SHA-256,SCRAM-SHA-512"},
		{[]string{s512}, []string{pl}, "PLAIN"},
		{[]string{s512}, []string{"OAUTHBEARER"}, ""},
	} {
		if got := names(loginOrder("u", "p", tc.held, tc.enabled)); got != tc.want {
			t.Errorf("held %v, enabled %v: %s, want %s", tc.held, tc.enabled, got, tc.want)
		}
	}
}
