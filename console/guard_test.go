package console

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testpki"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/security/tlsconfig"
	"github.com/cohort-dev/cohort/server"
)

// startWithListeners starts a node without SASL on the given listeners
// (their TLS requiring client certificates), with the console on a
// loopback HTTP listener.
func startWithListeners(t *testing.T, hosts []string, ls ...server.Listener) *node.Node {
	t.Helper()
	ca := testpki.NewCA(t, "ca")
	pair := ca.Server(t, "cohort")
	mtls, err := tlsconfig.New(tlsconfig.Options{CertFile: pair.CertFile, KeyFile: pair.KeyFile,
		ClientCAFile: ca.CertFile, ClientAuth: tlsconfig.ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	return startNode(t, false, func(c *node.Config) {
		c.Listen, c.Listeners, c.Security, c.HTTPHosts = "", ls, &node.SecurityConfig{TLS: mtls}, hosts
	})
}

// TestConsoleNeverBypassesClientCertificates: the console's in-memory
// connections carry no certificate, so on a node whose only listener
// requires one the console must not let anybody in as ANONYMOUS (it did:
// any local user read every group); it answers 403 saying what to add. With
// a listener that lets clients in without a certificate beside it, the
// console follows that one, anonymously, as any client there is.
func TestConsoleNeverBypassesClientCertificates(t *testing.T) {
	n := startWithListeners(t, nil, server.Listener{Name: "MTLS", Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"})
	code, body := get(t, "http://"+n.HTTPAddr()+"/console/", "", "")
	if code != http.StatusForbidden || !strings.Contains(body, "requires a client certificate") || !strings.Contains(body, "SASL") {
		t.Fatalf("mTLS-only node: %d %s, want 403 naming the reason", code, body)
	}
	if _, _, err := n.ConsoleListener(); err == nil {
		t.Fatal("ConsoleListener chose a listener that requires client certificates")
	}

	n = startWithListeners(t, nil,
		server.Listener{Name: "MTLS", Protocol: server.ProtocolSSL, Addr: "127.0.0.1:0"},
		server.Listener{Name: "LOCAL", Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"})
	if name, sasl, err := n.ConsoleListener(); name != "LOCAL" || sasl || err != nil {
		t.Fatalf("ConsoleListener = %q %v %v, want the PLAINTEXT listener", name, sasl, err)
	}
	if code, body := get(t, "http://"+n.HTTPAddr()+"/console/", "", ""); code != http.StatusOK {
		t.Fatalf("with a PLAINTEXT listener: %d %s", code, body)
	}
}

// TestLoopbackHTTPRefusesOtherHostNames: a loopback HTTP listener answers
// requests naming it by address or localhost, and refuses (421) one naming
// any other host, as a web page that rebound its own name to 127.0.0.1
// would send (DNS rebinding): the console, /metrics and the health
// endpoints alike. A name given in HTTPHosts (a same-host reverse proxy) is
// answered. Every answer carries nosniff and refuses framing.
func TestLoopbackHTTPRefusesOtherHostNames(t *testing.T) {
	n := startWithListeners(t, []string{"Console.Example.ORG", "proxy.example:8443"}, server.Listener{Protocol: server.ProtocolPlaintext, Addr: "127.0.0.1:0"})
	_, port, _ := strings.Cut(n.HTTPAddr(), ":")
	do := func(path, host string) (int, http.Header, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+n.HTTPAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, path := range []string{"/console/", "/metrics", "/healthz", "/readyz"} {
		for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1.nip.io:" + port, "localhost.attacker.example"} {
			code, h, body := do(path, host)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--http-hosts") {
				t.Errorf("%s with Host %s: %d, want 421 naming --http-hosts", path, host, code)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s with Host %s: headers %v", path, host, h)
			}
		}
		for _, host := range []string{n.HTTPAddr(), "localhost:" + port, "LOCALHOST", "cohort.localhost:" + port, "[::1]:" + port, "console.example.org:" + port, "console.example.org.", "proxy.example", "proxy.example:443"} {
			if code, _, body := do(path, host); code != http.StatusOK {
				t.Errorf("%s with Host %s: %d %s, want 200", path, host, code, body)
			}
		}
	}
}

// TestWrongPasswordsDoNotHoldTheLoginSlot: a wrong console password is
// answered after the node's failed-authentication delay, but that wait no
// longer holds the console's login slot (one on two cores), so a right
// password gets in while wrong ones wait: before, each wrong password held
// the slot for the delay of both SCRAM mechanisms, and a loop of them kept
// everyone out.
func TestWrongPasswordsDoNotHoldTheLoginSlot(t *testing.T) {
	const delay = 3 * time.Second
	defer func(f func() int) { loginSlots = f }(loginSlots)
	loginSlots = func() int { return 1 } // as on two cores, whatever this machine has
	n := startNode(t, true, func(c *node.Config) { c.Security.FailedAuthDelay = delay })
	base := "http://" + n.HTTPAddr() + "/console/"
	before := authCounts(t, n.HTTPAddr())
	type answer struct {
		code int
		took time.Duration
		err  error
	}
	wrong := make(chan answer, 1)
	go func() {
		start := time.Now()
		code, _, err := getErr(base, "admin", "wrong")
		wrong <- answer{code, time.Since(start), err}
	}()
	// Once both mechanisms have failed, the wrong login waits its delay.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		after := authCounts(t, n.HTTPAddr())
		if after["SCRAM-SHA-256 failure"] > before["SCRAM-SHA-256 failure"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wrong login never failed")
		}
	}
	start := time.Now()
	if code, body := get(t, base, "admin", adminPassword); code != http.StatusOK {
		t.Fatalf("right password: %d %s", code, body)
	}
	// A login is milliseconds; waiting for the slot would be the delay.
	if took := time.Since(start); took >= delay {
		t.Fatalf("the right password took %v: it waited for the slot a wrong one held", took)
	}
	select {
	case a := <-wrong:
		t.Fatalf("the wrong password was answered (%d after %v) before the right one got in: the delay is not being waited", a.code, a.took)
	default:
	}
	var a answer
	select {
	case a = <-wrong:
	case <-time.After(30 * time.Second):
		t.Fatal("the wrong login was not answered")
	}
	if a.err != nil {
		t.Fatalf("wrong password: %v", a.err)
	}
	if a.code != http.StatusUnauthorized || a.took < delay {
		t.Fatalf("wrong password: %d after %v, want 401 after at least %v", a.code, a.took, delay)
	}
}
