package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestTLSCertificateExpiryAndReloadMetrics: the node exports when the
// certificate of its listeners expires (the one in use: unchanged by a
// reload that fails, the new one's after a reload that works) and counts
// its reloads by result, so that an alert sees a certificate running out
// and a rotation whose new files did not load; before, only an ERROR log
// line told of either.
func TestTLSCertificateExpiryAndReloadMetrics(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	now := time.Now().Truncate(time.Second)
	first := ca.ServerUntil(t, "first", now.Add(10*24*time.Hour))
	second := ca.ServerUntil(t, "second", now.Add(90*24*time.Hour))
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	put := func(dst, src string, cut int) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b[:len(b)-cut], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put(certFile, first.CertFile, 0)
	put(keyFile, first.KeyFile, 0)
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg := secureConfig(t, memstore.New())
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSASLSSL, Addr: "127.0.0.1:0"}}
	cfg.Security.TLS = srvTLS
	cfg.HTTPListen = "127.0.0.1:0"
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })

	const expiry, reloads = "cohort_tls_certificate_expiry_timestamp_seconds", "cohort_reloads_total"
	check := func(when string, notAfter time.Time, reloaded, failed float64) {
		t.Helper()
		s := scrapeMetrics(t, n.HTTPAddr())
		if v, want := s.value(expiry, "certificate", "listeners"), float64(notAfter.Unix()); v != want {
			t.Errorf("%s: %s{certificate=listeners} %v, want %v", when, expiry, v, want)
		}
		if v := s.value(expiry, "certificate", "etcd"); v != 0 {
			t.Errorf("%s: %s{certificate=etcd} %v on a node without etcd", when, expiry, v)
		}
		if v := s.value(reloads, "files", "tls", "result", "reloaded"); v != reloaded {
			t.Errorf("%s: %s{files=tls,result=reloaded} %v, want %v", when, reloads, v, reloaded)
		}
		if v := s.value(reloads, "files", "tls", "result", "failed"); v != failed {
			t.Errorf("%s: %s{files=tls,result=failed} %v, want %v", when, reloads, v, failed)
		}
		if v := s.value(reloads, "files", "etcd_tls"); v != 0 {
			t.Errorf("%s: %s counts etcd_tls reloads on a node without etcd: %v", when, reloads, v)
		}
	}
	check("at start", first.TLS.Leaf.NotAfter, 0, 0)

	put(certFile, second.CertFile, 100) // half written
	put(keyFile, second.KeyFile, 0)
	if err := n.ReloadTLS(); err == nil {
		t.Fatal("reload of a half-written certificate succeeded")
	}
	check("after a failed reload", first.TLS.Leaf.NotAfter, 0, 1)

	put(certFile, second.CertFile, 0)
	if err := n.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	check("after a reload", second.TLS.Leaf.NotAfter, 1, 1)
	if !second.TLS.Leaf.NotAfter.Equal(now.Add(90 * 24 * time.Hour)) {
		t.Fatalf("the second certificate expires %v, want %v", second.TLS.Leaf.NotAfter, now.Add(90*24*time.Hour))
	}
}
