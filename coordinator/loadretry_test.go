package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// failingLoads fails the first fail loads of partition p.
type failingLoads struct {
	store.Store
	p     int32
	fail  int32
	loads atomic.Int32 // of p
}

func (f *failingLoads) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	if p == f.p {
		if f.loads.Add(1) <= f.fail {
			return errors.New("etcdserver: request timed out")
		}
	}
	return f.Store.Load(ctx, p, fn)
}

// TestFailedLoadIsRetried: a partition whose load fails is not given up:
// it answers COORDINATOR_LOAD_IN_PROGRESS (which clients retry) and loads
// again after a pause that doubles (100 ms, 200 ms, ...), then serves what
// the store holds. Before, one error (an etcd timeout, a compaction between
// two pages of the load) left it answering NOT_COORDINATOR for as long as
// this node owned it, while every client was sent here.
func TestFailedLoadIsRetried(t *testing.T) {
	mem := memstore.New()
	const grp = "g-retry"
	p := PartitionFor(grp, 8)
	// A committed offset the load must find.
	seed, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	seed.Start()
	if err := seed.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	seedEnv := &env{t: t, c: seed}
	if r := seedEnv.do(commitRequest(grp, "", -1, "t", 42)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	seed.Close()

	st := &failingLoads{Store: mem, p: p, fail: 2}
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	e := &env{t: t, c: c, clk: clk}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLoaded(ctx); err != nil { // the first attempt ended
		t.Fatal(err)
	}
	code := func() int16 {
		r := e.do(fetchReq(grp, "t")).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) == 0 {
			return r.ErrorCode
		}
		return r.Topics[0].Partitions[0].ErrorCode
	}
	// failed waits until the partition has seen its n-th load fail (and
	// so has set its pause on the fake clock).
	failed := func(n int) {
		t.Helper()
		part := c.parts[p]
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			part.mu.Lock()
			f := part.loadFailures
			part.mu.Unlock()
			if f >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d failed loads of partition %d, want %d", f, p, n)
			}
		}
	}
	waitLoads := func(n int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); st.loads.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d loads of partition %d, want %d", st.loads.Load(), p, n)
			}
		}
	}
	failed(1)
	if got := code(); got != group.ErrCoordinatorLoading {
		t.Fatalf("after a failed load: error %d, want COORDINATOR_LOAD_IN_PROGRESS", got)
	}
	// Not before the pause.
	clk.Advance(99 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if n := st.loads.Load(); n != 1 {
		t.Fatalf("%d loads before the first pause ended", n)
	}
	clk.Advance(time.Millisecond)
	failed(2) // fails again: the pause doubles
	clk.Advance(199 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if n := st.loads.Load(); n != 2 {
		t.Fatalf("%d loads before the second pause ended", n)
	}
	clk.Advance(time.Millisecond)
	waitLoads(3)
	for deadline := time.Now().Add(10 * time.Second); code() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the partition never served after its load succeeded: error %d", code())
		}
	}
	if o := e.fetch(grp, "t"); o != 42 {
		t.Fatalf("offset %d after the retried load, want 42", o)
	}
}
