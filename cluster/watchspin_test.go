package cluster

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/server"
)

// refusedWatch is a node's handle on the store that grants its reads but
// ends every watch at once, as etcd did for a watch added to a stream whose
// auth token it had forgotten.
type refusedWatch struct {
	*MemClient
	loads atomic.Int64
}

func (r *refusedWatch) Load(ctx context.Context) (Snapshot, error) {
	r.loads.Add(1)
	return r.MemClient.Load(ctx)
}

func (r *refusedWatch) Watch(context.Context, int64) <-chan WatchBatch {
	ch := make(chan WatchBatch, 1)
	ch <- WatchBatch{Err: ErrUnavailable}
	close(ch)
	return ch
}

// TestRefusedWatchDoesNotSpin: a watch that ends before delivering anything
// while the reads before it succeed makes the node pause before reading
// again, as after a failed read; it read its state again and again without
// pause (thousands of etcd reads a second from one node).
func TestRefusedWatchDoesNotSpin(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	mem := NewMemLeases(clk)
	ls := &refusedWatch{MemClient: mem.Client()}
	c, err := New(Config{Leases: ls, Fence: &simFence{revs: map[int32]int64{}}, NodeID: 1, Partitions: simParts,
		LeaseTTL: 3 * time.Second, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetSelf(server.Broker{Host: "n1", Port: 10})
	c.Start(&simCoord{held: map[int32]bool{}})
	defer c.Close()
	// At one instant: the node reads once and waits for the pause (or, as
	// before, reads on and on).
	start := clk.Now()
	testwait.For(t, 10*time.Second, "the node to pause after its read, or 100 reads", func() bool {
		next, ok := clk.NextDeadline()
		return ls.loads.Load() >= 100 || ls.loads.Load() > 0 && ok && next.Equal(start.Add(watchRetryPause))
	})
	if n := ls.loads.Load(); n != 1 {
		t.Fatalf("%d reads of the state with the clock stopped, every watch ending at once: want 1, then a pause", n)
	}
	for clk.Now().Sub(start) < 2*time.Second {
		var next time.Time
		testwait.For(t, 10*time.Second, "a timer of the node", func() bool {
			var ok bool
			next, ok = clk.NextDeadline()
			return ok
		})
		clk.Set(next)
	}
	// One read per pause of watchRetryPause, and the first.
	if n, most := ls.loads.Load(), int64(2*time.Second/watchRetryPause)+2; n > most {
		t.Fatalf("%d reads of the state in 2 s with every watch ending at once, want at most %d", n, most)
	}
}
