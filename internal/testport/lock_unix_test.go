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
