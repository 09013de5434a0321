package node

import (
	"crypto/x509/pkix"
	"os"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testpki"
)

// TestEtcdTLSReloadRefusesHugeFile: the etcd client certificate files are
// read with the same bound as the listeners' (tlsconfig.MaxPEMFile): a
// path that is too large fails the reload, the certificate in use stays,
// and the next reload of good files takes them.
func TestEtcdTLSReloadRefusesHugeFile(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	first, second := ca.Client(t, pkix.Name{CommonName: "first"}), ca.Client(t, pkix.Name{CommonName: "second"})
	dir := t.TempDir()
	certFile, keyFile := dir+"/etcd.crt", dir+"/etcd.key"
	copyTestFile(t, first.CertFile, certFile)
	copyTestFile(t, first.KeyFile, keyFile)
	et, err := newEtcdTLS(&ClusterConfig{CAFile: ca.CertFile, CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	copyTestFile(t, second.CertFile, certFile)
	copyTestFile(t, second.KeyFile, keyFile)
	if err := os.Truncate(keyFile, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := et.reload(); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("reload with a 64 MiB key file: %v, want an error saying it is too large", err)
	}
	if got := et.cert.Load().Certificate[0]; string(got) != string(first.TLS.Certificate[0]) {
		t.Fatal("a refused reload changed the certificate in use")
	}
	copyTestFile(t, second.KeyFile, keyFile)
	if err := et.reload(); err != nil {
		t.Fatal(err)
	}
	if got := et.cert.Load().Certificate[0]; string(got) != string(second.TLS.Certificate[0]) {
		t.Fatal("the next good reload did not take the new certificate")
	}
}

func copyTestFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
