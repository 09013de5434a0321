// Package testport hands tests a free TCP port on 127.0.0.1 that they may
// close and listen on again later (a server restarted on the same address,
// an etcd member that must keep its peer URL).
//
// Asking the kernel for port 0 gives a port from the ephemeral range, the
// same range the kernel draws the local ports of outgoing connections from:
// once the test closes its listener, any connection the test process (or
// another process) opens may be given that port, and the restart fails
// with "address already in use"; and a test that dials such a port while
// its server is still starting may be connected to itself (the kernel gave
// the dial the port it dials), taking that for the server. Ports here come
// from outside the ephemeral range (below it, or above it where it starts
// low), which outgoing connections never use, so only another listener
// can take one, and Reserve checks that none holds it.
//
// `go test ./...` runs packages in parallel processes, each handing out
// ports: two of them could pick the same free port, and one test's server
// then fails to listen while the other's answers its client. Each port
// handed out is therefore also locked (flock on a file per port in the
// temporary directory, held until the process exits), and a port another
// process holds is skipped.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest is the lowest port handed out: above the well-known and common
// service ports.
const lowest = 20000

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Reserve returns "127.0.0.1:port" for a port outside the ephemeral range
// that nothing listens on now and that this process has not handed out
// before. It fails the test when it finds none after a bounded number of
// tries.
func Reserve(t testing.TB) string {
	t.Helper()
	lo, hi := freeRange()
	mu.Lock()
	defer mu.Unlock()
	for try := 0; try < 200; try++ {
		p := lo + rand.IntN(hi-lo)
		if given[p] {
			continue
		}
		if !lockPort(p) {
			continue // another test process has it
		}
		given[p] = true // locked by this process from now on
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatalf("testport: no free port in [%d, %d) after 200 tries", lo, hi)
	return ""
}

// freeRange is the ports [lo, hi) Reserve draws from: those the kernel
// never gives an outgoing connection (nor a listen on port 0). Below the
// ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range) from
// lowest up, where that leaves room; else above it, where that does; else
// (or where the range is not known) below 32768, a common default start of
// the range and below the IANA range 49152–65535.
func freeRange() (lo, hi int) {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	return rangeOutside(string(b))
}

// minRoom is the fewest ports a range to draw from must have.
const minRoom = 1000

// rangeOutside is freeRange for the content of ip_local_port_range.
func rangeOutside(ephemeral string) (lo, hi int) {
	if f := strings.Fields(ephemeral); len(f) == 2 {
		first, err1 := strconv.Atoi(f[0])
		last, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && first <= last {
			if first-lowest >= minRoom {
				return lowest, first
			}
			if 65536-(last+1) >= minRoom {
				// A range that starts low (a container's "1024 60999",
				// say): the ports below it are few or taken by
				// services; those above it are never ephemeral.
				return max(last+1, lowest), 65536
			}
		}
	}
	return lowest, 32768
}
