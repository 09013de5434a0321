//go:build unix

package testport

import (
	"net"
	"strconv"
	"testing"
)

// TestReservedPortIsLocked: a port handed out stays locked for the process's
// life, so that another test process (which opens the lock file anew, as a
// second open here does) skips it.
func TestReservedPortIsLocked(t *testing.T) {
	addr := Reserve(t)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	if lockPort(p) {
		t.Fatalf("port %d was handed out, yet its lock could be taken again", p)
	}
}

// TestRangeOutside: the ports Reserve draws from lie outside the kernel's
// ephemeral range whenever that leaves room for them.
func TestRangeOutside(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi int
	}{
		{"32768\t60999\n", 20000, 32768}, // Linux's default
		{"40000 60999", 20000, 40000},
		{"1024\t60999", 61000, 65536}, // starts below lowest: above it
		{"15000 50000", 50001, 65536}, // starts too close to lowest
		{"1024 65000", 20000, 32768},  // no room either side: the old guess
		{"", 20000, 32768},            // not known
		{"60999 32768", 20000, 32768}, // nonsense
	} {
		lo, hi := rangeOutside(c.in)
		if lo != c.lo || hi != c.hi {
			t.Errorf("rangeOutside(%q) = [%d, %d), want [%d, %d)", c.in, lo, hi, c.lo, c.hi)
		}
	}
}
