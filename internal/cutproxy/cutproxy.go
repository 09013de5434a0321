// Package cutproxy is a TCP proxy for tests that can be cut and restored:
// cut closes every connection it carries and refuses new ones (accepted and
// closed at once) until restored. Tests put one between a node and etcd to
// take etcd away from that node alone. It listens on 127.0.0.1.
package cutproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards connections to one target.
type Proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	isCut bool
}

// Start starts a proxy to target (host:port), closed when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	t.Cleanup(func() { p.Cut(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut := p.isCut
			p.mu.Unlock()
			if cut {
				c.Close()
				continue
			}
			up, err := net.DialTimeout("tcp", target, time.Second)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore lets new connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
}
