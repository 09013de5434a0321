package node

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
)

// TestHTTPSListener: with HTTPTLS the HTTP listener (metrics, health, the
// console) speaks HTTPS with the node's certificate, follows ReloadTLS like
// the Kafka listeners, and does not answer plain HTTP; without a
// certificate or an HTTP listener the node refuses to start.
func TestHTTPSListener(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: first.CertFile, KeyFile: first.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	base := func() Config {
		return Config{Listeners: []server.Listener{{Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"}},
			DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", HTTPTLS: true,
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			Security: &SecurityConfig{TLS: srvTLS}}
	}
	noCert := base()
	noCert.Security = nil
	noCert.Listeners = nil
	noCert.Listen = "127.0.0.1:0"
	if n, err := Start(noCert); err == nil {
		n.Close()
		t.Fatal("HTTPS without a certificate started")
	} else if !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Errorf("error %q", err)
	}
	noHTTP := base()
	noHTTP.HTTPListen = ""
	if n, err := Start(noHTTP); err == nil {
		n.Close()
		t.Fatal("--http-tls without --http-listen started")
	}

	n, err := Start(base())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tr := &http.Transport{TLSClientConfig: ca.ClientConfig(nil)}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func() string {
		t.Helper()
		tr.CloseIdleConnections() // a new handshake each time
		resp, err := cl.Get("https://" + n.HTTPAddr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
			t.Fatalf("GET /healthz over HTTPS: %d %q", resp.StatusCode, body)
		}
		return resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if cn := get(); cn != "first" {
		t.Fatalf("serving %q", cn)
	}
	plain, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + n.HTTPAddr() + "/healthz")
	if err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the HTTPS listener")
		}
	}
	for src, dst := range map[string]string{second.CertFile: first.CertFile, second.KeyFile: first.KeyFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if cn := get(); cn != "second" {
		t.Fatalf("serving %q after ReloadTLS", cn)
	}
}
