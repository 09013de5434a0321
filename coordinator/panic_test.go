package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestShardPanicReloadsThePartition: a panic of the group state machine (a
// bug) while it handles a request does not leave the partition's mutex held
// (every group of the partition hung until a restart): the request is
// answered COORDINATOR_LOAD_IN_PROGRESS, the partition drops its suspect
// state and loads again from the store after a pause, and then serves what
// was durable; the other partitions are not touched.
func TestShardPanicReloadsThePartition(t *testing.T) {
	const grp, other = "g-panic", "g-other"
	p := PartitionFor(grp, 8)
	if PartitionFor(other, 8) == p {
		t.Fatal("pick another group id for the other partition")
	}
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: memstore.New(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	if err := c.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, clk: clk}
	if r := e.do(commitRequest(grp, "", -1, "t", 42)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	dispatchHook = func(req kmsg.Request) {
		if r, ok := req.(*kmsg.OffsetCommitRequest); ok && r.Group == grp {
			panic("a bug")
		}
	}
	defer func() { dispatchHook = nil }()
	if r := e.do(commitRequest(grp, "", -1, "t", 43)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != group.ErrCoordinatorLoading {
		t.Fatalf("the request that panicked: %+v, want COORDINATOR_LOAD_IN_PROGRESS", r)
	}
	dispatchHook = nil
	fetched := func(g string) (int64, int16) {
		r := e.do(fetchReq(g, "t")).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode != 0 || len(r.Topics) == 0 {
			return -1, r.ErrorCode
		}
		return r.Topics[0].Partitions[0].Offset, r.Topics[0].Partitions[0].ErrorCode
	}
	if _, code := fetched(grp); code != group.ErrCoordinatorLoading {
		t.Fatalf("the partition after the panic: error %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if _, code := fetched(other); code != 0 {
		t.Fatalf("another partition: error %d", code)
	}
	clk.Advance(loadRetryMin)
	deadline := time.Now().Add(10 * time.Second)
	for {
		off, code := fetched(grp)
		if code == 0 {
			if off != 42 {
				t.Fatalf("reloaded offset %d, want the durable 42", off)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reloaded: error %d", code)
		}
		time.Sleep(time.Millisecond)
	}
	if r := e.do(commitRequest(grp, "", -1, "t", 44)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("a commit after the reload: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
}
