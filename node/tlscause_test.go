package node

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// TestTLSCausesEveryEndpoint: when etcd cannot be reached over TLS, every
// endpoint is probed, not only the first: here the first endpoint's
// certificate is trusted, the second's is of another CA and nothing
// listens at the third; the causes name the second (an unknown authority)
// and the third (refused), in that order, and not the first.
func TestTLSCausesEveryEndpoint(t *testing.T) {
	ca, other := testpki.NewCA(t, "etcd-ca"), testpki.NewCA(t, "other-ca")
	good := testpki.ServeHandshakes(t, ca.Server(t, "good"))
	bad := testpki.ServeHandshakes(t, other.Server(t, "bad"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	eps := []string{"https://" + good, "https://" + bad, closed}
	got := tlsCauses(eps, ca.ClientConfig(nil), 10*time.Second)
	t.Logf("causes: %s", got)
	if strings.Contains(got, good) {
		t.Errorf("the endpoint whose certificate is trusted has a cause: %s", got)
	}
	b := strings.Index(got, "TLS with https://"+bad+": ")
	c := strings.Index(got, "TLS with "+closed+": ")
	if b < 0 || !strings.Contains(got[b:], "certificate signed by unknown authority") {
		t.Errorf("no unknown authority for the second endpoint: %s", got)
	}
	if c < b || !strings.Contains(got[c:], "refused") {
		t.Errorf("no refusal for the third endpoint, after the second: %s", got)
	}
	// An endpoint that accepts and never answers takes the probes' time
	// in all, not one deadline each: it is reported as timed out, beside
	// the others' causes.
	hang := silentListener(t)
	got = tlsCauses([]string{"https://" + hang, "https://" + bad}, ca.ClientConfig(nil), 300*time.Millisecond)
	if h := "TLS with https://" + hang + ": "; !strings.Contains(got, h) ||
		!strings.Contains(got, "unknown authority") || !strings.Contains(got, h+"no TLS handshake within 300ms") {
		t.Errorf("a silent endpoint beside a bad one: %s", got)
	}
	t.Logf("causes: %s", got)
	if got := tlsCauses(eps[:1], ca.ClientConfig(nil), 10*time.Second); got != "" {
		t.Errorf("a trusted endpoint alone: %q, want no cause", got)
	}
	if got := tlsCauses(eps[2:], nil, 10*time.Second); got != "" {
		t.Errorf("a plain endpoint without TLS: %q, want no cause", got)
	}
}

// TestTLSCausesWithoutTLSFlags: a node given no --etcd-ca, --etcd-cert or
// --etcd-key still talks TLS to an https:// endpoint (the etcd client
// verifies it against the system's CAs), and its handshake failure is
// named; a host:port endpoint is plain text then, and one that answers TLS
// is said to, with what to write instead. A plain endpoint that does not
// answer TLS, or nothing listening, has no TLS cause.
func TestTLSCausesWithoutTLSFlags(t *testing.T) {
	ca := testpki.NewCA(t, "etcd-ca")
	tlsEtcd := testpki.ServeHandshakes(t, ca.Server(t, "etcd"))
	got := tlsCauses([]string{"https://" + tlsEtcd}, nil, 10*time.Second)
	if !strings.Contains(got, "TLS with https://"+tlsEtcd+": ") || !strings.Contains(got, "certificate signed by unknown authority") {
		t.Errorf("https:// endpoint of a private CA without --etcd-ca: %q, want its unknown authority", got)
	}
	got = tlsCauses([]string{tlsEtcd}, nil, 10*time.Second)
	if !strings.Contains(got, "TLS with "+tlsEtcd+": it answers TLS") || !strings.Contains(got, "https://"+tlsEtcd) {
		t.Errorf("plain endpoint that answers TLS: %q, want it said, with the https:// endpoint to give", got)
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("\x00\x00\x12\x04\x00\x00\x00\x00\x00")) // an HTTP/2 SETTINGS frame, as plain gRPC starts
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	if got := tlsCauses([]string{plain.Addr().String(), closedAddr}, nil, 10*time.Second); got != "" {
		t.Errorf("plain endpoints without TLS flags: %q, want no cause", got)
	}
}

// TestDialEtcdWithUserNamesTLSCause: with --etcd-user the etcd client
// authenticates while it connects, so a TLS handshake that fails (here
// etcd's certificate is of a CA --etcd-ca does not hold) ends the
// connection itself, not the first read; the error names the handshake's
// cause there too, as it does for a node without a user.
func TestDialEtcdWithUserNamesTLSCause(t *testing.T) {
	ca, other := testpki.NewCA(t, "etcd-ca"), testpki.NewCA(t, "other-ca")
	bad := "https://" + testpki.ServeHandshakes(t, other.Server(t, "etcd"))
	for _, user := range []string{"", "cohort"} {
		cc := &ClusterConfig{Endpoints: []string{bad}, CAFile: ca.CertFile, DialTimeout: time.Second}
		if user != "" {
			cc.Username, cc.Password = user, "secret-not-shown"
		}
		cli, _, err := dialEtcd(context.Background(), cc)
		if err == nil {
			cli.Close()
			t.Fatalf("user %q: etcd of an untrusted certificate was usable", user)
		}
		if !strings.Contains(err.Error(), "TLS with "+bad+": ") || !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("user %q: %v\nwant the handshake's cause", user, err)
		}
		if strings.Contains(err.Error(), "secret-not-shown") {
			t.Errorf("user %q: the error holds the password: %v", user, err)
		}
	}
}

// silentListener returns the address of a loopback listener that accepts
// connections and never answers on them (held until the test ends).
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	return l.Addr().String()
}

// TestDialEtcdContextCancelled: cohort store copy stops on Ctrl-C; while
// it connects to an etcd that never answers, the dial ends with the
// cancelled context, not after its DialTimeout (--timeout, 30 s by
// default there), with and without a user (whose authentication is part of the dial).
func TestDialEtcdContextCancelled(t *testing.T) {
	hang := silentListener(t)
	for _, user := range []string{"", "cohort"} {
		cc := &ClusterConfig{Endpoints: []string{hang}, DialTimeout: 8 * time.Second}
		if user != "" {
			cc.Username, cc.Password = user, "pw"
		}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		cli, err := DialEtcd(ctx, cc)
		took := time.Since(start)
		cancel()
		if err == nil {
			cli.Close()
			t.Fatalf("user %q: a silent etcd was usable", user)
		}
		if !errors.Is(err, context.Canceled) || took > 4*time.Second {
			t.Errorf("user %q: dial ended after %v with %v; want context.Canceled well before the 8 s DialTimeout", user, took, err)
		}
	}
}
