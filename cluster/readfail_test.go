package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/server"
)

// deniedReads is a node's handle on the store whose reads can be refused
// (its etcd user lost read permission on the prefix; keepalives need none)
// and whose watches the test can end.
type deniedReads struct {
	*MemClient
	deny    atomic.Bool
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (d *deniedReads) Load(ctx context.Context) (Snapshot, error) {
	if d.deny.Load() {
		return Snapshot{}, rpctypes.ErrPermissionDenied
	}
	return d.MemClient.Load(ctx)
}

func (d *deniedReads) Watch(ctx context.Context, rev int64) <-chan WatchBatch {
	ctx, cancel := context.WithCancel(ctx)
	d.mu.Lock()
	d.cancels = append(d.cancels, cancel)
	d.mu.Unlock()
	return d.MemClient.Watch(ctx, rev)
}

func (d *deniedReads) endWatches() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.cancels {
		c()
	}
	d.cancels = nil
}

// TestFailingReadsWarned: a node whose lease holds but whose reads of the
// nodes and partition owners keep failing retries without end and follows
// no other node's changes; it said so only at debug level. It now warns
// once the failures have lasted readFailWarnAfter (with the permission hint
// and the count), at most once per readFailLogEvery, and says when reading
// works again.
func TestFailingReadsWarned(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	mem := NewMemLeases(clk)
	ls := &deniedReads{MemClient: mem.Client()}
	var logs lockedLog
	// A long lease: the test steps the clock through many retry pauses,
	// and the keepalives must keep up however the goroutines are scheduled.
	c, err := New(Config{Leases: ls, Fence: &simFence{revs: map[int32]int64{}}, NodeID: 3, Partitions: simParts,
		LeaseTTL: 60 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.SetSelf(server.Broker{Host: "n3", Port: 10})
	c.Start(&simCoord{held: map[int32]bool{}})
	defer c.Close()
	testwait.For(t, 10*time.Second, "the node to serve", c.Serving)
	step := func(d time.Duration) {
		t.Helper()
		end := clk.Now().Add(d)
		for clk.Now().Before(end) {
			var next time.Time
			// The pause after a failed read (not a later timer, such
			// as the next keepalive, before the pause is armed).
			testwait.For(t, 10*time.Second, "the pause after a failed read", func() bool {
				var ok bool
				next, ok = clk.NextDeadline()
				return ok && next.Sub(clk.Now()) <= watchRetryPause
			})
			clk.Set(next)
		}
	}
	const warn = `level=WARN msg="cluster: reading the nodes and partition owners keeps failing`
	testwait.For(t, 10*time.Second, "the node's watch", func() bool {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return len(ls.cancels) > 0
	})
	ls.deny.Store(true)
	ls.endWatches()
	step(3 * time.Second)
	if n := logs.count(warn); n != 0 {
		t.Fatalf("%d warnings after 3 s of failed reads, want none yet:\n%s", n, logs.String())
	}
	step(3 * time.Second)
	if n := logs.count(warn); n != 1 {
		t.Fatalf("%d warnings after 6 s of failed reads, want 1:\n%s", n, logs.String())
	}
	if logs.count(`hint="this node's etcd user lost read permission on its prefix"`) != 1 || logs.count("failing_for=5s") != 1 {
		t.Fatalf("the warning lacks the hint or how long:\n%s", logs.String())
	}
	step(30 * time.Second)
	if n := logs.count(warn); n != 1 {
		t.Fatalf("%d warnings after 36 s of failed reads (a read every %v), want still 1:\n%s", n, watchRetryPause, logs.String())
	}
	if !c.Serving() {
		t.Fatal("the node stopped serving: its lease held")
	}
	ls.deny.Store(false)
	testwait.For(t, 10*time.Second, "a line saying reads work again", func() bool {
		if logs.count(`msg="cluster: reading the nodes and partition owners again"`) == 1 {
			return true
		}
		if next, ok := clk.NextDeadline(); ok {
			clk.Set(next)
		}
		return false
	})
}
