package node

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/acl"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestMetricsAuth: with MetricsAuth, /metrics answers only a user of the
// node allowed DESCRIBE on the cluster (or a super user); a scrape without
// credentials, with a wrong password or for an unknown user is 401 and
// counted as a failed authentication, a user without the ACL is 403, and
// /healthz stays open.
func TestMetricsAuth(t *testing.T) {
	cfg := secureConfig(t, memstore.New())
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.MetricsAuth = true
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := kadm.NewClient(scramClient(t, n.Addr(), "admin", adminPassword))
	createUser(ctx, t, admin, "scraper", "scraper-password")
	createUser(ctx, t, admin, "app", "app-password")
	if res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:scraper").Clusters().Operations(kadm.OpDescribe)); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, res)
	}

	get := func(path, user, pass string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.HTTPAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}

	if code, _, _ := get("/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz without credentials: %d", code)
	}
	code, h, body := get("/metrics", "", "")
	if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") || strings.Contains(body, "cohort_") {
		t.Errorf("/metrics without credentials: %d %q %q", code, h.Get("WWW-Authenticate"), body)
	}
	for _, c := range []struct{ user, pass string }{{"scraper", "wrong"}, {"nobody", "scraper-password"}} {
		if code, _, body := get("/metrics", c.user, c.pass); code != http.StatusUnauthorized || strings.Contains(body, "cohort_") {
			t.Errorf("/metrics as %s with a wrong password: %d %q", c.user, code, body)
		}
	}
	if code, _, body := get("/metrics", "app", "app-password"); code != http.StatusForbidden || strings.Contains(body, "cohort_") {
		t.Errorf("/metrics as a user without DESCRIBE on the cluster: %d %q", code, body)
	}
	code, _, body = get("/metrics", "scraper", "scraper-password")
	if code != http.StatusOK {
		t.Fatalf("/metrics as scraper: %d %q", code, body)
	}
	// Two failures with a password (the scrape without credentials is not
	// an attempt), two successes (app's, then scraper's).
	for _, want := range []string{
		`cohort_server_authentications_total{listener="HTTP",mechanism="BASIC",result="failure"} 2`,
		`cohort_server_authentications_total{listener="HTTP",mechanism="BASIC",result="success"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _, _ := get("/metrics", "admin", adminPassword); code != http.StatusOK {
		t.Errorf("/metrics as the super user: %d", code)
	}
}

// TestMetricsAuthRefusedOverPlainHTTP: MetricsAuth does not start where
// passwords would cross the network in clear, nor without an HTTP listener.
func TestMetricsAuthRefusedOverPlainHTTP(t *testing.T) {
	for _, c := range []struct{ listen, want string }{
		{"0.0.0.0:0", "--http-tls"},
		{"", "--http-listen"},
	} {
		cfg := secureConfig(t, memstore.New())
		cfg.HTTPListen = c.listen
		cfg.MetricsAuth = true
		n, err := Start(cfg)
		if err == nil {
			n.Close()
			t.Fatalf("MetricsAuth with --http-listen %q started", c.listen)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("MetricsAuth with --http-listen %q: %v", c.listen, err)
		}
	}
}

// TestMetricsAuthNeedsSomeoneAllowed: MetricsAuth on a node that enforces
// no ACLs (no listener authenticates, no Authorizer) and has no super user
// is a ConfigError: a scrape needs DESCRIBE on the cluster, and such a node
// refuses to store ACLs, so no one could ever scrape. With the authorizer,
// an authenticating listener, a super user or AllowEveryoneIfNoACLFound it
// may start.
func TestMetricsAuthNeedsSomeoneAllowed(t *testing.T) {
	open := func() Config {
		cfg := secureConfig(t, memstore.New())
		cfg.Listeners = []server.Listener{{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"}}
		cfg.Security.SuperUsers = nil
		cfg.HTTPListen, cfg.MetricsAuth = "127.0.0.1:0", true
		return cfg
	}
	err := CheckConfig(open())
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("MetricsAuth on a node without ACLs or super users: %v, want a ConfigError", err)
	}
	for _, want := range []string{"--metrics-auth", "--authorizer", "--super-users"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	for name, change := range map[string]func(*Config){
		"authorizer":      func(c *Config) { c.Security.Authorizer = true },
		"super user":      func(c *Config) { c.Security.SuperUsers = []string{"User:admin"} },
		"allow if no ACL": func(c *Config) { c.Security.AllowEveryoneIfNoACLFound = true },
		"SASL listener": func(c *Config) {
			c.Listeners = []server.Listener{{Protocol: server.ProtocolSASLPlaintext, Addr: "127.0.0.1:0"}}
		},
		"no metrics-auth": func(c *Config) { c.MetricsAuth = false },
	} {
		cfg := open()
		change(&cfg)
		if err := CheckConfig(cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestMetricsAuthClientCertificate: over HTTPS on a node with client CAs, a
// scraper may present a client certificate instead of a password: its
// principal (User:<CN>) needs DESCRIBE on the cluster like a user's; a
// certificate from another CA fails the handshake, and a browser without
// one still gets the password prompt.
func TestMetricsAuthClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "cohort")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile,
		ClientCAFile: ca.CertFile, ClientAuth: tlsconfig.ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	cfg := secureConfig(t, memstore.New())
	cfg.Listeners = []server.Listener{{Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"}}
	cfg.Security.TLS = srvTLS
	cfg.HTTPListen, cfg.HTTPTLS, cfg.MetricsAuth = "127.0.0.1:0", true, true
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	allow := acl.Binding{ResourceType: acl.ResourceCluster, ResourceName: acl.ClusterName, PatternType: acl.PatternLiteral,
		Principal: "User:prometheus", Host: "*", Operation: acl.OpDescribe, Permission: acl.PermissionAllow}
	if errs := n.Security().CreateACLs(ctx, []acl.Binding{allow}); errs[0] != nil {
		t.Fatal(errs[0])
	}

	get := func(tlsCfg *tls.Config) (int, string, error) {
		tr := &http.Transport{TLSClientConfig: tlsCfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + n.HTTPAddr() + "/metrics")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	prom := ca.Client(t, pkix.Name{CommonName: "prometheus"})
	code, body, err := get(ca.ClientConfig(&prom))
	if err != nil || code != http.StatusOK {
		t.Fatalf("scrape with prometheus's certificate: %d %v", code, err)
	}
	if want := `cohort_server_authentications_total{listener="HTTP",mechanism="SSL",result="success"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	other := ca.Client(t, pkix.Name{CommonName: "app"})
	if code, body, err := get(ca.ClientConfig(&other)); err != nil || code != http.StatusForbidden || strings.Contains(body, "cohort_") {
		t.Errorf("scrape with a certificate whose principal has no ACL: %d %v %q", code, err, body)
	}
	if code, _, err := get(ca.ClientConfig(nil)); err != nil || code != http.StatusUnauthorized {
		t.Errorf("scrape without a certificate or a password: %d %v", code, err)
	}
	stranger := testpki.NewCA(t, "other-ca").Client(t, pkix.Name{CommonName: "prometheus"})
	strangerCfg := ca.ClientConfig(nil)
	// Sent whatever CAs the server names (Go's client would send none).
	strangerCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger.TLS, nil }
	if code, _, err := get(strangerCfg); err == nil {
		t.Errorf("scrape with a certificate of another CA: %d, want a failed handshake", code)
	}
}

// TestMetricsAuthCheckDroppedWhenClientGone: a scrape whose client has gone
// (or whose authentication time ran out) before its password check got a
// slot is not checked, as a Kafka PLAIN login in the same case is not: the
// checks share PLAIN's few slots, and a flood of scrapes that hang up at
// once (HTTP/2 resets its streams, or closes the connection, leaving each
// handler running) must not queue PBKDF2 work that holds the Kafka
// listeners' PLAIN logins back after its clients left. It is answered 503
// (nobody reads it) whatever the password, and nothing is served.
func TestMetricsAuthCheckDroppedWhenClientGone(t *testing.T) {
	cfg := secureConfig(t, memstore.New())
	cfg.HTTPListen = "127.0.0.1:0"
	cfg.MetricsAuth = true
	n := startLoaded(t, cfg)
	t.Cleanup(func() { n.Close() })
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, pass := range []string{adminPassword, "wrong"} {
		req := httptest.NewRequestWithContext(gone, http.MethodGet, "/metrics", nil)
		req.SetBasicAuth("admin", pass)
		rec := httptest.NewRecorder()
		n.HTTPMux().ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), "cohort_") {
			t.Errorf("scrape with password %q whose client is gone: %d %.60q, want 503 and no metrics (its password never checked)",
				pass, rec.Code, rec.Body.String())
		}
	}
}
