package server

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConnLogLinesNameListener: every line a connection's refusal logs names
// the listener it came in on, besides the client's address. A node with
// several listeners (an internal SASL_PLAINTEXT one, an external one) left
// the operator guessing which one a misconfigured client was hitting: the
// lines of an unsupported SASL mechanism, of a request before SASL
// authentication and of a bad request (a TLS client on a listener without
// TLS) named only the remote address.
func TestConnLogLinesNameListener(t *testing.T) {
	buf := &syncBuffer{}
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, nil))
	})

	c := f.ts.dial(t)
	if h := handshake(t, c, 1, "PLAIN"); h.ErrorCode != errUnsupportedSaslMechanism {
		t.Fatalf("handshake for PLAIN: error %d, want %d", h.ErrorCode, errUnsupportedSaslMechanism)
	}
	c.expectClosed()

	c = f.ts.dial(t)
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID = "g", "m"
	c.send(req, 1)
	c.expectClosed()

	c = f.ts.dial(t)
	c.writeRaw([]byte{0x7f, 0xff, 0xff, 0xff})
	c.expectClosed()

	c = f.ts.dial(t) // a line that named the listener already
	handshake(t, c, 1, "TEST")
	if r := authenticate(t, c, 2, "alice:wrong"); r.ErrorCode != errSaslAuthenticationFailed {
		t.Fatalf("wrong password: error %d", r.ErrorCode)
	}
	c.expectClosed()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"closing connection: unsupported SASL mechanism",
		"closing connection: request before SASL authentication completed",
		"closing connection: request too large before SASL authentication",
		"authentication failed",
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.Contains(l, w) {
				found = true
				if !strings.Contains(l, "listener="+ProtocolSASLPlaintext) || !strings.Contains(l, "remote=127.0.0.1:") {
					t.Errorf("the line does not name the listener and the client's address: %s", l)
				}
				if strings.Count(l, "listener=") != 1 {
					t.Errorf("the line does not name the listener exactly once: %s", l)
				}
			}
		}
		if !found {
			t.Errorf("no line %q in:\n%s", w, buf.String())
		}
	}
}
