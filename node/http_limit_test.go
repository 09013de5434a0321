package node

import (
	"errors"
	"io"
	"log/slog"
	"net"
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
	l := limitListener(ln, 2)
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
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.WriteTimeout <= 0 || h.IdleTimeout <= 0 || h.MaxHeaderBytes <= 0 {
		t.Fatalf("HTTP server without a bound: header %v, read %v, write %v, idle %v, header bytes %d",
			h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout, h.MaxHeaderBytes)
	}
}
