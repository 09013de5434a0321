package node

import (
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterEtcdHTTPEndpointWithTLSRefused: the etcd client drops TLS for
// an http:// endpoint whatever its TLS configuration holds, so a node given
// --etcd http://... with --etcd-ca (or --etcd-cert and --etcd-key) talked to
// etcd in plain text, password included, and started as if the TLS flags
// applied. Such a configuration is now refused before anything is opened,
// naming the endpoint and what to write instead. An --etcd holding no
// endpoint at all is refused there too, naming the flag.
func TestClusterEtcdHTTPEndpointWithTLSRefused(t *testing.T) {
	ca := testpki.NewCA(t, "etcd-ca")
	client := ca.Client(t, pkix.Name{CommonName: "cohort"})
	ec := etcdtest.Start(t, 1) // plain text, on http:// endpoints
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, cc := range map[string]ClusterConfig{
		"--etcd-ca":   {CAFile: ca.CertFile},
		"--etcd-cert": {CertFile: client.CertFile, KeyFile: client.KeyFile},
	} {
		cc.Endpoints, cc.LeaseTTL, cc.DialTimeout = ec.Endpoints(), testLeaseTTL, 3*time.Second
		n, err := Start(Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "test", Partitions: 2, Logger: quiet, Cluster: &cc})
		if err == nil {
			n.Close()
			t.Fatalf("%s with etcd endpoints %v: the node started, talking to etcd in plain text", name, cc.Endpoints)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", name, err)
		}
		for _, want := range []string{ec.Endpoints()[0], name, "https://"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not name %q", name, err, want)
			}
		}
	}
	err := CheckConfig(Config{Listen: "127.0.0.1:0", Cluster: &ClusterConfig{}})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--etcd") {
		t.Errorf("no etcd endpoint: %v, want a ConfigError naming --etcd", err)
	}
}

// TestClusterEtcdPrefixNotUTF8Refused: an --etcd-prefix that is not UTF-8,
// or holds a NUL, is refused, naming the flag: with such bytes one
// cluster's keys could fall among another's partitions (the byte after
// P d is a partition's first, 0 or 0xff for cohort's), which a valid
// prefix cannot.
func TestClusterEtcdPrefixNotUTF8Refused(t *testing.T) {
	for _, p := range []string{"/cohort/d\xff\xff\xff", "/a\x00/", "/\xc3/"} {
		err := CheckConfig(Config{Listen: "127.0.0.1:0", Cluster: &ClusterConfig{Endpoints: []string{"127.0.0.1:2379"}, Prefix: p}})
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--etcd-prefix") || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("prefix %q: %v, want a ConfigError naming --etcd-prefix and UTF-8", p, err)
		}
	}
	for _, p := range []string{"", "/cohort/", "/cohort/dev/", "/é/"} {
		if err := CheckConfig(Config{Listen: "127.0.0.1:0", Cluster: &ClusterConfig{Endpoints: []string{"127.0.0.1:2379"}, Prefix: p}}); err != nil {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
}
