package node

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestHTTPListenerLimits: the HTTP listener accepts at most its bound of
// connections at once (the next waits until one closes), a closed listener
// stops a waiting Accept, and every connection ends in bounded time (the
// server's timeouts are set; the stdlib enforces them).
func TestHTTPListenerLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitListener(ln, 2, 2)
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with two open and a bound of 2")
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close frees nothing more
	third := <-accepted
	second.Close()
	third.Close()
	l.Close()
	if _, ok := <-accepted; ok {
		t.Fatal("Accept after Close")
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on the closed listener: %v", err)
	}

	n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h := n.http
	if h.HTTP2 == nil || h.HTTP2.MaxConcurrentStreams <= 0 || h.HTTP2.MaxConcurrentStreams > maxHTTP2Streams {
		t.Fatalf("HTTP/2 streams per connection not bounded: %+v", h.HTTP2)
	}
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.WriteTimeout <= 0 || h.IdleTimeout <= 0 || h.MaxHeaderBytes <= 0 {
		t.Fatalf("HTTP server without a bound: header %v, read %v, write %v, idle %v, header bytes %d",
			h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout, h.MaxHeaderBytes)
	}
}

// TestHTTPListenerPerIPLimit: one address holding its bound of connections
// open (half-sent requests) gets its next connection closed at once, while
// another address is served (/healthz answers): one client cannot take the
// whole listener from the health probes.
func TestHTTPListenerPerIPLimit(t *testing.T) {
	n, err := Start(Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), HTTPListen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := n.HTTPAddr()
	for range maxHTTPConnsPerIP {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\n")); err != nil { // and no end
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the listener has accepted them
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetDeadline(time.Now().Add(3 * time.Second))
	over.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"))
	// Closed unanswered: an EOF, or a reset (the request was unread).
	var ne net.Error
	if b, err := io.ReadAll(over); len(b) != 0 || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection beyond the address's bound: read %q, %v; want it closed unanswered", b, err)
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 2 * time.Second}
	other, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	defer other.Close()
	other.SetDeadline(time.Now().Add(3 * time.Second))
	other.Write([]byte("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
	if b, _ := io.ReadAll(other); !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Fatalf("another address: %q", b)
	}
}
