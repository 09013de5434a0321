package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// TestSASLSSLOneAuthDeadline: on a SASL_SSL listener the TLS handshake and
// the SASL exchange share one authentication timeout, counted from the
// connection's start. A client that spends most of it before its TLS
// handshake and then sends nothing is closed when the timeout passes, not
// given a fresh timeout for SASL after the handshake.
func TestSASLSSLOneAuthDeadline(t *testing.T) {
	// Long enough that a loaded machine's scheduling delays (CI runs this
	// under -race on two busy cores) stay well inside the margins below.
	const timeout = 4 * time.Second
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "server")
	f := startAuthServer(t, ProtocolSASLSSL, &tls.Config{Certificates: []tls.Certificate{pair.TLS}}, func(s *Security) {
		s.AuthTimeout = timeout
	})
	start := time.Now()
	raw, err := net.DialTimeout("tcp", f.ts.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The slow client: its ClientHello comes halfway into the timeout. That is
	// its behaviour, not a measurement; the server's deadline decides what
	// follows.
	time.Sleep(timeout / 2)
	cfg := ca.ClientConfig(nil)
	cfg.ServerName = "127.0.0.1"
	tc := tls.Client(raw, cfg)
	tc.SetDeadline(start.Add(3 * timeout)) // ends the test's wait should the server never close
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake within the timeout: %v", err)
	}
	// Nothing more is sent: the server must close at the connection's
	// deadline, timeout after it started.
	_, err = io.ReadAll(tc)
	closedAfter := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was still open %v after it started (authentication timeout %v)", closedAfter, timeout)
	}
	// With a fresh timeout after the handshake the close comes at 1.5 ×
	// timeout; with one deadline, at 1 × timeout. The bound is midway.
	if closedAfter > timeout*5/4 {
		t.Fatalf("an unauthenticated SASL_SSL connection was closed %v after it started, its TLS handshake %v in; want about the authentication timeout, %v, for TLS and SASL together",
			closedAfter.Round(10*time.Millisecond), timeout/2, timeout)
	}
}
