// Package testwait awaits a condition in a test without a fixed sleep: it
// checks the condition, and between checks waits with a back-off that starts
// at 100µs and doubles up to 50ms, so a condition that holds soon is seen
// soon and one that takes long costs few checks. Every wait is bounded: the
// caller says how long the condition may take.
//
// Use it for things the test cannot be told about (another goroutine's or
// process's state, a port becoming free, a remote view converging). What
// can be awaited on a channel, or driven by internal/clock's fake clock,
// should be.
package testwait

import (
	"net"
	"testing"
	"time"
)

const (
	firstPause = 100 * time.Microsecond
	maxPause   = 50 * time.Millisecond
)

// Until checks cond until it returns true or within has passed, and reports
// whether it returned true. cond is checked at least once, and once more at
// the end of the bound.
func Until(within time.Duration, cond func() bool) bool {
	end := time.NewTimer(within)
	defer end.Stop()
	pause := firstPause
	next := time.NewTimer(pause)
	defer next.Stop()
	for {
		if cond() {
			return true
		}
		next.Reset(pause)
		select {
		case <-end.C:
			return cond()
		case <-next.C:
		}
		if pause *= 2; pause > maxPause {
			pause = maxPause
		}
	}
}

// For is Until that fails the test (t.Fatalf, naming what) when cond has not
// returned true within the bound.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, cond) {
		t.Fatalf("%s: not within %v", what, within)
	}
}

// Err calls f until it returns nil or within has passed, and returns f's
// last error (nil on success). For retrying an operation such as a request
// or a listen that may fail for a while.
func Err(within time.Duration, f func() error) error {
	var err error
	Until(within, func() bool {
		err = f()
		return err == nil
	})
	return err
}

// Dials reports whether a TCP connection to addr opens within 200ms (it is
// closed at once).
func Dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Listening waits until addr accepts TCP connections, failing the test when
// it does not within the bound.
func Listening(t testing.TB, within time.Duration, addr string) {
	t.Helper()
	For(t, within, "something listening on "+addr, func() bool { return Dials(addr) })
}

// WallClock skips t under -short, saying why: t is a wall-clock
// integration test (a real node, etcd, a child process or an external
// client, with real timeouts), which takes seconds and is left out of the
// inner loop `go test -short ./...`; the full `go test ./...` runs it.
func WallClock(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: wall-clock integration test (%s); run without -short", what)
	}
}
