package node

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdTLS: a node reaches an etcd that serves TLS and requires a
// client certificate through --etcd-ca, --etcd-cert and --etcd-key. Without
// the certificate, or trusting another CA, it is refused at start with an
// error that says what to check. ReloadEtcdTLS (SIGHUP) makes new
// connections present the certificate now in the files: once they hold a
// certificate of a second CA and etcd has restarted trusting only that CA,
// the node keeps serving, while a client with the first certificate is
// refused. A reload of files that do not match keeps the certificate in use.
func TestClusterEtcdTLS(t *testing.T) {
	ca1, ca2 := testpki.NewCA(t, "etcd-ca-1"), testpki.NewCA(t, "etcd-ca-2")
	srv := ca1.Server(t, "etcd")
	first := ca1.Client(t, pkix.Name{CommonName: "cohort"})
	second := ca2.Client(t, pkix.Name{CommonName: "cohort"})
	ec := etcdtest.StartTLS(t, 1, etcdtest.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile,
		ClientCAFile: ca1.CertFile, Client: ca1.ClientConfig(&first)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cohort.pem"), filepath.Join(dir, "cohort-key.pem")
	put := func(cert, key string) {
		t.Helper()
		for _, f := range [][2]string{{cert, certFile}, {key, keyFile}} {
			b, err := os.ReadFile(f[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(first.CertFile, first.KeyFile)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(ca, cert, key string) (*Node, error) {
		return Start(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2, Logger: quiet,
			Cluster: &ClusterConfig{Endpoints: ec.Endpoints(), CAFile: ca, CertFile: cert, KeyFile: key,
				LeaseTTL: testLeaseTTL, DialTimeout: 3 * time.Second}})
	}
	for _, tc := range []struct {
		name, ca, cert, key, want string
	}{
		{"no client certificate", ca1.CertFile, "", "", "does etcd ask for a client certificate"},
		{"another CA", ca2.CertFile, certFile, keyFile, "does --etcd-ca trust etcd's certificate"},
	} {
		n, err := start(tc.ca, tc.cert, tc.key)
		if err == nil {
			n.Close()
			t.Fatalf("%s: the node started", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q; want it to say %q", tc.name, err, tc.want)
		}
	}

	n, err := start(ca1.CertFile, certFile, keyFile)
	if err != nil {
		t.Fatalf("the node with its certificate: %v", err)
	}
	defer n.Close()
	adm := kadm.NewClient(client(t, n.Addr()))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	commit := func(at int64) { commitUntilOwned(ctx, t, adm, "g", "events", at) }
	commit(1)

	// Files that do not match: an error, and the certificate in use stays.
	put(second.CertFile, first.KeyFile)
	if err := n.ReloadEtcdTLS(); err == nil || !strings.Contains(err.Error(), "--etcd-cert/--etcd-key") {
		t.Fatalf("reload of a certificate with another certificate's key: %v", err)
	}
	put(second.CertFile, second.KeyFile)
	if err := n.ReloadEtcdTLS(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	// The reloads are counted, and the expiry exported is the new
	// certificate's.
	s := scrapeMetrics(t, n.HTTPAddr())
	for _, want := range []struct {
		name   string
		labels []string
		v      float64
	}{
		{"cohort_reloads_total", []string{"files", "etcd_tls", "result", "failed"}, 1},
		{"cohort_reloads_total", []string{"files", "etcd_tls", "result", "reloaded"}, 1},
		{"cohort_tls_certificate_expiry_timestamp_seconds", []string{"certificate", "etcd"}, float64(second.TLS.Leaf.NotAfter.Unix())},
	} {
		if v := s.value(want.name, want.labels...); v != want.v {
			t.Errorf("%s%v: %v, want %v", want.name, want.labels, v, want.v)
		}
	}

	// etcd now trusts only the second CA: every connection is made again.
	ec.Stop(0)
	ec.SetTLS(etcdtest.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca2.CertFile,
		Client: ca1.ClientConfig(&second)})
	if err := ec.Restart(0); err != nil {
		t.Fatal(err)
	}
	old, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), DialTimeout: 2 * time.Second,
		TLS: ca1.ClientConfig(&first), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	gctx, gcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = old.Get(gctx, "/cohort/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	gcancel()
	if err == nil {
		t.Fatal("etcd still accepts the first certificate: the test shows nothing")
	}
	commit(2)
	r, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := r.Lookup("events", 0); !ok || o.At != 2 {
		t.Fatalf("offset after the restart: %+v %v", o, ok)
	}

	// A node whose etcd is not over TLS has no certificate to reload.
	var plain Node
	if err := plain.ReloadEtcdTLS(); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("ReloadEtcdTLS without etcd: %v", err)
	}
}
