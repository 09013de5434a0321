package main

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestStoreCopyEtcdTLS: against an etcd that serves TLS and requires a
// client certificate of its CA, the copy connects with serve's flags
// (--etcd-ca, --etcd-cert, --etcd-key) both ways and verifies what it
// copied. Trusting another CA, or presenting no client certificate, it
// fails within its --timeout (not a hang) with an error that says what to
// check and what the TLS handshake met (an unknown authority, a client
// certificate required), and writes nothing: no key under the prefix, no
// data directory.
func TestStoreCopyEtcdTLS(t *testing.T) {
	t.Parallel() // its own CAs, etcd and store directory; no environment
	ca, other := testpki.NewCA(t, "etcd-ca"), testpki.NewCA(t, "other-ca")
	srv := ca.Server(t, "etcd")
	client := ca.Client(t, pkix.Name{CommonName: "cohort"})
	ec := etcdtest.StartTLS(t, 1, etcdtest.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile,
		ClientCAFile: ca.CertFile, Client: ca.ClientConfig(&client)})
	ep := strings.Join(ec.Endpoints(), ",")
	if !strings.HasPrefix(ep, "https://") {
		t.Fatalf("etcd's endpoints are not TLS: %s", ep)
	}
	etcd := ec.Client(t)
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("2")}},
		0: {{Key: []byte("\x02offset-0"), Value: []byte("v0")}}, 1: {{Key: []byte("\x02offset-1"), Value: []byte("v1")}},
		-2: {{Key: []byte("user"), Value: []byte("scram")}}})
	c := cli{t: t}
	tlsFlags := func(caFile string, withCert bool) []string {
		f := []string{"--etcd-ca", caFile, "--timeout", "3s"}
		if withCert {
			f = append(f, "--etcd-cert", client.CertFile, "--etcd-key", client.KeyFile)
		}
		return f
	}
	const prefix = "/tls/"
	back := filepath.Join(t.TempDir(), "back")
	for _, tc := range []struct {
		name     string
		ca       string
		withCert bool
		want     []string
	}{
		{"another CA", other.CertFile, true, []string{"does --etcd-ca trust etcd's certificate", "certificate signed by unknown authority"}},
		{"no client certificate", ca.CertFile, false, []string{"does etcd ask for a client certificate", "certificate required"}},
	} {
		for _, args := range [][]string{
			{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", prefix},
			{"store", "copy", "--from-etcd", ep, "--etcd-prefix", prefix, "--to-data-dir", back},
		} {
			args = append(args, tlsFlags(tc.ca, tc.withCert)...)
			start := time.Now()
			_, errOut, code := c.run(args...)
			took := time.Since(start)
			for _, want := range tc.want {
				if code != 1 || !strings.Contains(errOut, want) {
					t.Fatalf("%s, %q: exit %d, want 1 and an error saying %q:\n%s", tc.name, args[2], code, want, errOut)
				}
			}
			// --timeout 3s bounds connecting and each request; a
			// failure takes about that, far from a hang.
			if took > 20*time.Second {
				t.Fatalf("%s, %q: failed after %s, want within --timeout 3s and some slack", tc.name, args[2], took)
			}
			t.Logf("%s, %s: exit %d after %s: %s", tc.name, args[2], code, took.Round(time.Millisecond), strings.TrimSpace(errOut))
			if k := etcdKeys(t, etcd, prefix); k != 0 {
				t.Fatalf("%s: a failed copy wrote %d keys under %s", tc.name, k, prefix)
			}
			if _, err := os.Stat(back); !os.IsNotExist(err) {
				t.Fatalf("%s: a failed copy made %s: %v", tc.name, back, err)
			}
		}
	}

	out := c.ok(append([]string{"store", "copy", "--from-data-dir", dir, "--to-etcd", ep, "--etcd-prefix", prefix},
		tlsFlags(ca.CertFile, true)...)...)
	if !strings.Contains(out, "verified: ") {
		t.Fatalf("copy to etcd over TLS:\n%s", out)
	}
	if k := etcdKeys(t, etcd, prefix); k != 4 {
		t.Fatalf("%d keys under %s after the copy, want the 4 records", k, prefix)
	}
	out = c.ok(append([]string{"store", "copy", "--from-etcd", ep, "--etcd-prefix", prefix, "--to-data-dir", back},
		tlsFlags(ca.CertFile, true)...)...)
	if !strings.Contains(out, "verified: data directory "+back) {
		t.Fatalf("copy from etcd over TLS:\n%s", out)
	}
	// The copy back holds what the source held.
	c.ok(append([]string{"store", "copy", "--from-data-dir", back, "--to-etcd", ep, "--etcd-prefix", "/tls-again/"},
		tlsFlags(ca.CertFile, true)...)...)
	for _, p := range []string{prefix, "/tls-again/"} {
		if k := etcdKeys(t, etcd, p); k != 4 {
			t.Fatalf("%d keys under %s, want 4", k, p)
		}
	}
}

// TestStoreCopyEtcdTLSEveryEndpoint: with two endpoints, the first one a
// TLS server whose certificate --etcd-ca trusts (but no etcd) and the
// second an etcd whose certificate it does not trust, the copy fails
// within its --timeout and the error says what the second endpoint's
// handshake met, an unknown authority: every endpoint is probed, not
// only the first, whose handshake succeeds and says nothing.
func TestStoreCopyEtcdTLSEveryEndpoint(t *testing.T) {
	ca, other := testpki.NewCA(t, "etcd-ca"), testpki.NewCA(t, "other-ca")
	srv := ca.Server(t, "etcd")
	ec := etcdtest.StartTLS(t, 1, etcdtest.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, Client: ca.ClientConfig(nil)})
	etcdEP := ec.Endpoints()[0]
	// The first endpoint: a TLS handshake with a certificate of the CA
	// the copy trusts, then one byte that is no HTTP/2, and silence.
	first := "https://" + testpki.ServeHandshakes(t, other.Server(t, "not-etcd"))
	dir := diskStore(t, map[int32][]store.Record{-1: {{Key: []byte("partitions"), Value: []byte("1")}}})
	c := cli{t: t}
	_, errOut, code := c.run("store", "copy", "--from-data-dir", dir, "--to-etcd", first+","+etcdEP, "--etcd-prefix", "/tls/",
		"--etcd-ca", other.CertFile, "--timeout", "3s")
	t.Logf("exit %d: %s", code, strings.TrimSpace(errOut))
	if code != 1 || !strings.Contains(errOut, "TLS with "+etcdEP+": tls: failed to verify certificate: x509: certificate signed by unknown authority") {
		t.Fatalf("exit %d, want 1 and the second endpoint's cause, an unknown authority:\n%s", code, errOut)
	}
	if strings.Contains(errOut, "TLS with "+first) {
		t.Fatalf("the first endpoint, whose handshake succeeds, has a cause:\n%s", errOut)
	}
	if k := etcdKeys(t, ec.Client(t), "/tls/"); k != 0 {
		t.Fatalf("a failed copy wrote %d keys", k)
	}
}
