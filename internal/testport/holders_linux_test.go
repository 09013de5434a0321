package testport

import (
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestHolders: a listener on a reserved port is found, as this process's,
// in LISTEN state; a connection to it shows on the same port; once it is
// closed nothing listens there.
func TestHolders(t *testing.T) {
	addr := Reserve(t)
	_, port, _ := net.SplitHostPort(addr)
	if got := Holders(addr); got != "nothing listens on port "+port {
		t.Errorf("Holders of a free port: %q", got)
	}
	if pids, known := Listeners(addr); len(pids) > 0 || !known {
		t.Errorf("Listeners of a free port: %v, %v; want none, true", pids, known)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	pid := "pid " + strconv.Itoa(os.Getpid()) + " ("
	got := Holders(addr)
	if !strings.Contains(got, "listening on port "+port+": "+addr+" held by "+pid) {
		t.Errorf("Holders: %q, want the listener held by %s…)", got, pid)
	}
	// The accepted end has the listener's port locally.
	if !strings.Contains(got, "other sockets with local port "+port+": ESTABLISHED "+addr+" -> "+c.LocalAddr().String()) {
		t.Errorf("Holders: %q, want the connection from %s", got, c.LocalAddr())
	}
	if pids, known := Listeners(addr); len(pids) != 1 || pids[0] != os.Getpid() || !known {
		t.Errorf("Listeners: %v, %v; want [%d], true", pids, known, os.Getpid())
	}
	ln.Close()
	if got := Holders(addr); !strings.HasPrefix(got, "nothing listens on port "+port+"; other sockets") {
		t.Errorf("Holders once the listener closed, its accepted connection still open: %q", got)
	}
}

// TestProcAddr decodes addresses as a little-endian machine prints them.
func TestProcAddr(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the cases are written as a little-endian machine prints them")
	}
	for in, want := range map[string]string{
		"0100007F:5BA0":                         "127.0.0.1:23456",
		"00000000000000000000000001000000:1F90": "[::1]:8080",
		"00000000:0000":                         "0.0.0.0:0",
	} {
		ip, port, ok := procAddr(in)
		if got := net.JoinHostPort(ip, strconv.Itoa(port)); !ok || got != want {
			t.Errorf("procAddr(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, _, ok := procAddr("zz:1"); ok {
		t.Error("procAddr of bad hex: ok")
	}
}
