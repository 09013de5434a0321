package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Reloadable files, as the files label of cohort_reloads_total names them.
const (
	reloadTLS       = "tls"        // --tls-cert-file, --tls-key-file, --tls-client-ca-file
	reloadEtcdTLS   = "etcd_tls"   // --etcd-cert, --etcd-key
	reloadOAuthJWKS = "oauth_jwks" // --oauth-jwks-file
)

// reloadResults are the results cohort_reloads_total counts.
var reloadResults = []string{"reloaded", "failed"}

// newReloadCounter is cohort_reloads_total: the reloads asked of the node
// (SIGHUP, or ReloadTLS, ReloadEtcdTLS and ReloadOAuthKeys in Go) by the
// files reloaded and the result. A failed reload leaves the node on the
// files it read before, logged once at ERROR; the counter lets an alert
// see it, say after a certificate rotation whose new files did not load.
// Every pair of files the node has and result is exported from the start.
func newReloadCounter(reg prometheus.Registerer, files []string) *prometheus.CounterVec {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cohort_reloads_total",
		Help: "Reloads of the node's files asked for (SIGHUP), by the files (tls, etcd_tls, oauth_jwks) and result (reloaded; failed: the files read before stay in use).",
	}, []string{"files", "result"})
	reg.MustRegister(vec)
	for _, f := range files {
		for _, r := range reloadResults {
			vec.WithLabelValues(f, r)
		}
	}
	return vec
}

// reloadable lists the files this node rereads on a reload.
func (n *Node) reloadable() []string {
	var files []string
	if n.cfg.Security != nil && n.cfg.Security.TLS != nil {
		files = append(files, reloadTLS)
	}
	if n.cl != nil && n.cl.tls != nil && n.cl.tls.certFile != "" {
		files = append(files, reloadEtcdTLS)
	}
	if n.oauthKeys != nil {
		files = append(files, reloadOAuthJWKS)
	}
	return files
}

// countReload counts a reload of files that ended with err and returns
// err; nothing is counted for files the node does not have.
func (n *Node) countReload(files string, err error) error {
	if n.reloads == nil || errors.Is(err, ErrNotConfigured) {
		return err
	}
	result := "reloaded"
	if err != nil {
		result = "failed"
	}
	n.reloads.WithLabelValues(files, result).Inc()
	return err
}

// certificates returns the certificates this node presents, by the
// certificate label of cohort_tls_certificate_expiry_timestamp_seconds:
// listeners (the SSL and SASL_SSL listeners' and HTTPS's) and etcd (the
// client certificate it shows etcd). Each is the one in use, the last
// that loaded.
func (n *Node) certificates() map[string]*tls.Certificate {
	certs := map[string]*tls.Certificate{}
	if n.cfg.Security != nil && n.cfg.Security.TLS != nil {
		if c := n.cfg.Security.TLS.Certificate(); c != nil {
			certs["listeners"] = c
		}
	}
	if n.cl != nil && n.cl.tls != nil {
		if c := n.cl.tls.cert.Load(); c != nil {
			certs["etcd"] = c
		}
	}
	return certs
}

// leaf returns the certificate of c that names its holder (the first of
// its chain).
func leaf(c *tls.Certificate) *x509.Certificate {
	if c.Leaf != nil {
		return c.Leaf
	}
	if len(c.Certificate) == 0 {
		return nil
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}
