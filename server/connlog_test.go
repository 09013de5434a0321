package server

import (
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// TestConnLogLinesNameListener: every line a connection's refusal logs names
// the listener it came in on, besides the client's address. A node with
// several listeners (an internal SASL_PLAINTEXT one, an external one) left
// the operator guessing which one a misconfigured client was hitting: the
// lines of an unsupported SASL mechanism, of a request before SASL
// authentication and of a bad request (a TLS client on a listener without
// TLS) named only the remote address.
func TestConnLogLinesNameListener(t *testing.T) {
	buf := &testlog.Buffer{}
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

// TestTLSClientOnListenerWithoutTLS: a client configured for SSL or
// SASL_SSL that connects to a PLAINTEXT or SASL_PLAINTEXT listener sends a
// TLS ClientHello, whose first four bytes read as a request of some 369 MB.
// The connection is closed as before (Kafka closes it too; the client's own
// message is the helpful one), but the operator's line and counter name the
// cause instead of "bad request size" / frame_size, and the line names the
// listener.
func TestTLSClientOnListenerWithoutTLS(t *testing.T) {
	for _, protocol := range []string{ProtocolPlaintext, ProtocolSASLPlaintext} {
		t.Run(protocol, func(t *testing.T) {
			buf := &testlog.Buffer{}
			f := startAuthServer(t, protocol, nil, nil, func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(buf, nil))
			})
			nc, err := net.DialTimeout("tcp", f.ts.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			tc := tls.Client(nc, &tls.Config{InsecureSkipVerify: true})
			if err := tc.Handshake(); err == nil {
				t.Fatal("a TLS handshake with a listener without TLS succeeded")
			}
			pe := f.ts.srv.metrics.protocolErrors
			if got := testutil.ToFloat64(pe.WithLabelValues("tls_handshake")); got != 1 {
				t.Errorf("protocol errors tls_handshake = %v, want 1 (frame_size = %v)", got, testutil.ToFloat64(pe.WithLabelValues("frame_size")))
			}
			if got := testutil.ToFloat64(pe.WithLabelValues("frame_size")); got != 0 {
				t.Errorf("protocol errors frame_size = %v, want 0: it is not a request of a bad size", got)
			}
			log := buf.String()
			if !strings.Contains(log, "closing connection: TLS handshake on a listener without TLS") ||
				!strings.Contains(log, "listener="+protocol) {
				t.Errorf("the log does not name the cause and the listener:\n%s", log)
			}
		})
	}
}

// TestSASLClientOnListenerWithoutSASL: a client set up for SASL that
// connects to a PLAINTEXT (or SSL) listener gets ILLEGAL_SASL_STATE for its
// SaslHandshake, as from Kafka, and the connection stays usable; the client
// gives up on it and retries. The node said nothing about it: no line and
// no authentication counted, so an operator looking for why a client never
// gets in found nothing. It is now logged (on the failed-authentication
// budget) naming the listener and the mechanism, and counted as a failed
// authentication with a mechanism the listener does not offer ("other").
func TestSASLClientOnListenerWithoutSASL(t *testing.T) {
	buf := &testlog.Buffer{}
	f := startAuthServer(t, ProtocolPlaintext, nil, nil, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, nil))
	})
	c := f.ts.dial(t)
	if h := handshake(t, c, 1, "SCRAM-SHA-512"); h.ErrorCode != errIllegalSaslState {
		t.Fatalf("SaslHandshake on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", h.ErrorCode)
	}
	if code := heartbeat(t, c); code != 0 {
		t.Fatalf("heartbeat after the refused handshake: %d", code)
	}
	if got := f.authCount("other", "failure"); got != 1 {
		t.Errorf("failed authentications with mechanism other = %v, want 1", got)
	}
	log := buf.String()
	if !strings.Contains(log, "SaslHandshake on a listener without SASL") ||
		!strings.Contains(log, "listener="+ProtocolPlaintext) || !strings.Contains(log, "mechanism=SCRAM-SHA-512") {
		t.Errorf("the log does not name the cause, the listener and the mechanism:\n%s", log)
	}
}

// TestClientRefusingTheNodeCertificateIsNamed: a client that does not trust
// the node's certificate (another CA, or a name the certificate does not
// hold) aborts the handshake with an alert, which Go reports as "remote
// error: tls: bad certificate" (Java clients send "certificate unknown").
// On a listener that checks client certificates that reads as if the
// client's certificate were bad; the line now says that it is the client
// that refused the node's certificate, and what to check.
func TestClientRefusingTheNodeCertificateIsNamed(t *testing.T) {
	serverTLS, _ := selfSigned(t)
	buf := &testlog.Buffer{}
	f := startAuthServer(t, ProtocolSSL, serverTLS, nil, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, nil))
	})
	_, otherClient := selfSigned(t) // trusts another self-signed certificate
	nc, err := net.DialTimeout("tcp", f.ts.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tls.Client(nc, otherClient).Handshake(); err == nil {
		t.Fatal("a client trusting another certificate completed the handshake")
	}
	nc.Close()
	var line string
	testwait.For(t, 5*time.Second, "the failed handshake logged", func() bool {
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.Contains(l, "authentication failed") {
				line = l
				return true
			}
		}
		return false
	})
	if !strings.Contains(line, "the client refused the node's certificate") || !strings.Contains(line, "bad certificate") {
		t.Errorf("the line does not say that the client refused the node's certificate: %s", line)
	}
	if got := f.authCount("SSL", "failure"); got != 1 {
		t.Errorf("SSL failures = %v, want 1", got)
	}
}

// TestClientTextCutInLogLines: the strings an unauthenticated client chooses
// and the node quotes in its refusal lines (a SaslHandshake's mechanism, a
// request's client id) are cut to sasl.MaxLogText bytes, with their
// length. Uncut, one client that knows no credential made each of these
// lines up to 32 KiB (the protocol's string limit), so the bound of 10 such
// lines per 10 s bounded their count but not the log's growth.
func TestClientTextCutInLogLines(t *testing.T) {
	buf := &testlog.Buffer{}
	f := startAuthServer(t, ProtocolSASLPlaintext, nil, nil, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, nil))
	})
	long := strings.Repeat("M", 30000)

	c := f.ts.dial(t)
	if h := handshake(t, c, 1, long); h.ErrorCode != errUnsupportedSaslMechanism {
		t.Fatalf("handshake for a long mechanism: error %d, want %d", h.ErrorCode, errUnsupportedSaslMechanism)
	}
	c.expectClosed()

	c = f.ts.dial(t)
	c.writeRaw(frame(keyHeartbeat, 0, 1, strings.Repeat("C", 30000), []byte{0, 1, 'g', 0, 0, 0, 1, 0, 1, 'm'}))
	c.expectClosed()

	out := buf.String()
	for _, want := range []string{"closing connection: unsupported SASL mechanism", "closing connection: request before SASL authentication completed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no line %q in:\n%.2000s", want, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if len(l) > 2048 {
			t.Errorf("a %d-byte log line (client text not cut): %.300s…", len(l), l)
		}
	}
	if !strings.Contains(out, "30000 bytes") {
		t.Errorf("the cut text does not say how long it was:\n%.2000s", out)
	}
}
