package node

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
)

// TestHTTP2RequestsBounded: over HTTPS a client speaks HTTP/2 and sends many
// requests on one connection at once; the listener's handlers still run at
// most maxHTTPConnsPerIP requests of one address together (what its HTTP/1
// connections could), answer the others 429 at once, and keep answering
// /healthz meanwhile. Without the bound the connection limits bound nothing
// here: every stream of the one connection ran its handler.
func TestHTTP2RequestsBounded(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "node")
	srvTLS, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 256)
	release := make(chan struct{})
	n, err := Start(Config{Listeners: []server.Listener{{Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"}},
		DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", HTTPTLS: true,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Security: &SecurityConfig{TLS: srvTLS},
		HTTPHandlers: func(mux *http.ServeMux, _ *Node) {
			// Stands for a costly page: it holds its slot until released.
			mux.HandleFunc("GET /test/slow", func(w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				writeText(w, http.StatusOK, "done")
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tr := &http.Transport{TLSClientConfig: ca.ClientConfig(nil), ForceAttemptHTTP2: true, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	base := "https://" + n.HTTPAddr()

	const sent = 3 * maxHTTPConnsPerIP // within one connection's streams (maxHTTP2Streams)
	type result struct {
		code, proto int
		err         error
	}
	results := make(chan result, sent)
	var wg sync.WaitGroup
	defer func() {
		close(release)
		wg.Wait()
	}()
	for range sent {
		wg.Go(func() {
			resp, err := cl.Get(base + "/test/slow")
			if err != nil {
				results <- result{err: err}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results <- result{code: resp.StatusCode, proto: resp.ProtoMajor}
		})
	}
	// Every request either runs its handler (and waits there) or is
	// answered at once: wait until all are accounted for.
	running, refused := 0, 0
	timeout := time.After(15 * time.Second)
	for running+refused < sent {
		select {
		case <-entered:
			running++
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request: %v", r.err)
			}
			if r.proto != 2 {
				t.Fatalf("answered over HTTP/%d: the test needs HTTP/2", r.proto)
			}
			if r.code != http.StatusTooManyRequests {
				t.Fatalf("a request was answered %d before any was released", r.code)
			}
			refused++
		case <-timeout:
			t.Fatalf("after 15 s: %d requests running, %d refused, of %d", running, refused, sent)
		}
	}
	if running > maxHTTPConnsPerIP {
		t.Fatalf("%d requests of one address ran at once over one HTTP/2 connection; want at most %d", running, maxHTTPConnsPerIP)
	}
	if running < maxHTTPConnsPerIP {
		t.Fatalf("only %d requests ran at once, %d refused; want %d running", running, refused, maxHTTPConnsPerIP)
	}
	resp, err := cl.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("/healthz while the address is at its bound: %d over HTTP/%d", resp.StatusCode, resp.ProtoMajor)
	}
}

// TestRequestLimiterTotal: beyond the listener's total bound a request from
// an address under its own share is answered 503 without running its
// handler, and a finished request frees its slot.
func TestRequestLimiterTotal(t *testing.T) {
	in, release := make(chan struct{}), make(chan struct{})
	h := limitRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			in <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}), 2, 1)
	serve := func(addr, path string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = addr
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	var wg sync.WaitGroup
	for _, a := range []string{"192.0.2.1:1", "192.0.2.2:1"} {
		wg.Go(func() { serve(a, "/hold") })
		<-in
	}
	if c := serve("192.0.2.3:1", "/metrics"); c != http.StatusServiceUnavailable {
		t.Errorf("a third address with two requests running and a bound of 2: %d, want 503", c)
	}
	if c := serve("192.0.2.1:2", "/metrics"); c != http.StatusTooManyRequests {
		t.Errorf("an address at its own bound of 1: %d, want 429", c)
	}
	if c := serve("192.0.2.3:1", "/readyz"); c != http.StatusOK {
		t.Errorf("/readyz at the bound: %d", c)
	}
	release <- struct{}{}
	release <- struct{}{}
	wg.Wait()
	if c := serve("192.0.2.3:1", "/metrics"); c != http.StatusOK {
		t.Errorf("after the two finished: %d", c)
	}
}
