// Package testport hands tests a free TCP port on 127.0.0.1 that they may
// close and listen on again later (a server restarted on the same address,
// an etcd member that must keep its peer URL).
//
// Asking the kernel for port 0 gives a port from the ephemeral range, the
// same range the kernel draws the local ports of outgoing connections from:
// once the test closes its listener, any connection the test process (or
// another process) opens may be given that port, and the restart fails
// with "address already in use". Ports here come from below the ephemeral
// range, which outgoing connections never use, so only another listener
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

// Reserve returns "127.0.0.1:port" for a port below the ephemeral range
// that nothing listens on now and that this process has not handed out
// before. It fails the test when it finds none after a bounded number of
// tries.
func Reserve(t testing.TB) string {
	t.Helper()
	hi := ephemeralLow()
	mu.Lock()
	defer mu.Unlock()
	for try := 0; try < 200; try++ {
		p := lowest + rand.IntN(hi-lowest)
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
	t.Fatalf("testport: no free port in [%d, %d) after 200 tries", lowest, hi)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range; elsewhere 32768, a common
// default and below the IANA range 49152–65535).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lowest+1000 {
				return n
			}
		}
	}
	return 32768
}
