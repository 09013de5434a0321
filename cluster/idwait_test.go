package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/server"
)

// lockedLog is a log destination the cluster's goroutine and the test share.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lockedLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// TestDuplicateNodeIDWaitsQuietly: a node whose id another live process
// holds never had a session, so it does not say one ended: it says it waits
// for the id to be free, once at the first attempt and then once a minute
// (it tries every 2 s), and says so when it registers at last.
func TestDuplicateNodeIDWaitsQuietly(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	mem := NewMemLeases(clk)
	ctx := context.Background()
	other, _, err := mem.Grant(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := mem.Register(ctx, 2, []byte(`{"id":2,"host":"other","port":9}`), other); !ok || err != nil {
		t.Fatalf("register the other process: %v %v", ok, err)
	}
	var logs lockedLog
	c, err := New(Config{Leases: mem.Client(), Fence: &simFence{revs: map[int32]int64{}}, NodeID: 2, Partitions: simParts,
		LeaseTTL: 3 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.SetSelf(server.Broker{Host: "dup", Port: 10})
	c.Start(&simCoord{held: map[int32]bool{}})
	defer c.Close()
	// step lets the node's next attempt come: its backoff timer fires.
	step := func() {
		t.Helper()
		var next time.Time
		testwait.For(t, 10*time.Second, "the node's backoff timer", func() bool {
			var ok bool
			next, ok = clk.NextDeadline()
			return ok
		})
		clk.Set(next)
	}
	start := clk.Now()
	for clk.Now().Sub(start) < 150*time.Second {
		if _, err := mem.KeepAlive(ctx, other); err != nil { // the other process lives on
			t.Fatal(err)
		}
		step()
	}
	const waiting = `msg="cluster: waiting for node id 2 to be free: registered by another live process`
	// At 0 s, then at the first attempts past 60 s and 120 s.
	if n := logs.count(waiting); n != 3 {
		t.Errorf("%d lines saying the node waits for its id in 150 s of attempts every 2 s, want 3:\n%s", n, logs.String())
	}
	if n := logs.count("session ended"); n != 0 {
		t.Errorf("%d lines saying a session ended, for a node that never had one:\n%s", n, logs.String())
	}
	if n := logs.count("waited=1m"); n != 1 {
		t.Errorf("the second line does not say how long the node has waited:\n%s", logs.String())
	}

	// The other process goes: the next attempt registers.
	if err := mem.Revoke(ctx, other); err != nil {
		t.Fatal(err)
	}
	// The attempt the last step started may still be under way, and may
	// have found the id taken before the revoke: the node serves (its lease
	// is valid) from each attempt's grant until its registration is refused,
	// so wait for the line itself, letting the node's next attempts come
	// until one registers.
	const registered = `msg="cluster: node id registered after waiting for it to be free" node_id=2 waited=2m`
	for i := 0; logs.count(registered) == 0; i++ {
		if i == 3 {
			t.Fatalf("no line saying the node registered after waiting, %d attempts after the other process went:\n%s", i, logs.String())
		}
		step()
		testwait.Until(2*time.Second, func() bool { return logs.count(registered) > 0 })
	}
	testwait.For(t, 10*time.Second, "the node to serve", c.Serving)
	if n := logs.count(registered); n != 1 {
		t.Errorf("%d lines saying the node registered after waiting, want 1:\n%s", n, logs.String())
	}
}

// TestNoLeaseIsNotASessionEnded: a node started while the store is down never
// had a session, so its failed attempts say that none could begin, not that
// one ended; once it has had a session, losing it says so.
func TestNoLeaseIsNotASessionEnded(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	mem := NewMemLeases(clk)
	mem.SetDown(true)
	var logs lockedLog
	c, err := New(Config{Leases: mem.Client(), Fence: &simFence{revs: map[int32]int64{}}, NodeID: 1, Partitions: simParts,
		LeaseTTL: 3 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.SetSelf(server.Broker{Host: "n1", Port: 10})
	c.Start(&simCoord{held: map[int32]bool{}})
	defer c.Close()
	step := func() {
		t.Helper()
		var next time.Time
		testwait.For(t, 10*time.Second, "the node's next timer", func() bool {
			var ok bool
			next, ok = clk.NextDeadline()
			return ok
		})
		clk.Set(next)
	}
	for range 3 {
		step()
	}
	if n := logs.count("could not begin a session"); n < 3 {
		t.Errorf("%d lines saying no session could begin, after 3 failed grants:\n%s", n, logs.String())
	}
	if n := logs.count("session ended"); n != 0 {
		t.Errorf("%d lines saying a session ended, for a node that never had one:\n%s", n, logs.String())
	}
	mem.SetDown(false)
	step()
	testwait.For(t, 10*time.Second, "the node to serve", c.Serving)

	// A session it had ends: now it says so.
	mem.SetDown(true)
	testwait.For(t, 10*time.Second, "a line saying the session ended", func() bool {
		if logs.count("session ended") > 0 {
			return true
		}
		if next, ok := clk.NextDeadline(); ok {
			clk.Set(next)
		}
		return false
	})
}
