package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// TestReleaseStopsServingAtOnce: when Release returns, the partition serves
// nothing more and everything parked on it has been answered
// NOT_COORDINATOR (a JoinGroup waiting for its rebalance, a commit waiting
// for its write, a stable OffsetFetch waiting behind that commit), even when
// the partition's loop goroutine has not run yet. The cluster deletes the
// partition's ownership key right after Release, so that another node takes
// it over: a release left queued for the loop let this node answer from its
// copy (an OffsetFetch of an offset the new owner had since moved) while the
// new owner served the same groups.
func TestReleaseStopsServingAtOnce(t *testing.T) {
	t.Cleanup(func() { ctlHook = nil }) // after the env's Close: the loops are gone
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	const grp = "g"
	p := PartitionFor(grp, 8)
	member, gen := e.joinOne(grp)
	if r := e.do(commitRequest(grp, member, gen, "t", 9)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("commit")
	}

	// Parked: a second member's JoinGroup (the leader has not rejoined), a
	// commit whose write is held, and a stable fetch behind it.
	first := e.do(joinReq(grp, "", 9)).(*kmsg.JoinGroupResponse)
	joined := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { joined <- e.do(joinReq(grp, first.MemberID, 9)).(*kmsg.JoinGroupResponse) }()
	testwait.Until(5*time.Second, func() bool { return e.c.parts[p].pending() == 1 })
	release := holdAppends(st)
	t.Cleanup(release)
	committed := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() { committed <- e.do(commitRequest(grp, member, gen, "t", 10)).(*kmsg.OffsetCommitResponse) }()
	testwait.Until(5*time.Second, func() bool { return e.c.parts[p].pending() == 2 })
	fetched := make(chan *kmsg.OffsetFetchResponse, 1)
	go func() {
		r := fetchReq(grp, "t")
		r.RequireStable = true
		fetched <- e.do(r).(*kmsg.OffsetFetchResponse)
	}()
	if !testwait.Until(5*time.Second, func() bool { return e.c.parts[p].pending() == 3 }) {
		t.Fatalf("%d requests parked, want 3", e.c.parts[p].pending())
	}

	// The partition's loop is late: it holds a control message and has not
	// taken the partition's mutex.
	entered, unblock := make(chan struct{}), make(chan struct{})
	ctlHook = func(q int32, x ctl) {
		if q == p && x == ctlTopicsDeleted {
			close(entered)
			<-unblock
		}
	}
	t.Cleanup(func() {
		select {
		case <-unblock:
		default:
			close(unblock)
		}
	})
	e.c.TopicsDeleted([]string{"another-topic"})
	<-entered

	e.c.Release(p)
	if r := e.do(fetchReq(grp, "t")).(*kmsg.OffsetFetchResponse); r.ErrorCode != group.ErrNotCoordinator {
		t.Fatalf("after Release an OffsetFetch was answered %d (offset %d), want NOT_COORDINATOR",
			r.ErrorCode, r.Topics[0].Partitions[0].Offset)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = grp, member, gen
	if r := e.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != group.ErrNotCoordinator {
		t.Fatalf("after Release a Heartbeat was answered %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	// Answered before Release returned: receiving needs no wait.
	if r := <-joined; r.ErrorCode != group.ErrNotCoordinator {
		t.Errorf("parked join: %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	if r := <-fetched; r.ErrorCode != group.ErrNotCoordinator {
		t.Errorf("stable fetch: %d, want NOT_COORDINATOR", r.ErrorCode)
	}
	// The commit's caller runs the committer's round itself, held at the
	// gate with its write: it returns once the gate opens.
	close(unblock)
	release()
	if r := <-committed; r.Topics[0].Partitions[0].ErrorCode != group.ErrNotCoordinator {
		t.Errorf("parked commit: %d, want NOT_COORDINATOR", r.Topics[0].Partitions[0].ErrorCode)
	}

	// Back: loaded again once the loop runs, with what the store holds (the
	// refused commit's write reached it: unacknowledged, which is allowed).
	e.c.Acquire(p)
	var off int64 = -2
	if !testwait.Until(5*time.Second, func() bool {
		r := e.do(fetchReq(grp, "t")).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode != 0 {
			return false
		}
		off = r.Topics[0].Partitions[0].Offset
		return true
	}) {
		t.Fatal("not served again after Acquire")
	}
	if off != 10 {
		t.Fatalf("offset after reload: %d", off)
	}
}
