package coordinator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// A consumer group's rebalance whose completing write is in flight when its
// partition is released (it moves to another node) or the coordinator
// closes (the node stops) is counted by this node once the write is durable:
// the runtime reports the batch's result to the unloaded shard
// (group.Shard.LateWrites). When the partition loads again, nothing more is
// told: the rebalance counts once. Before, a result of an unloaded shard's
// batch was dropped and such a rebalance was counted by no node.
func TestRebalanceInFlightAtUnloadCounted(t *testing.T) {
	for _, how := range []string{"release", "close"} {
		t.Run(how, func(t *testing.T) {
			e, told := countingEnv(t)
			const grp = "cg"
			p := PartitionFor(grp, 8)
			hb := func(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse { return e.cgHeartbeat(grp, "a", epoch) }
			if r := hb(0); r.ErrorCode != 0 || told.Load() != 1 {
				t.Fatalf("join: code %d, %d rebalances told; want 0, 1", r.ErrorCode, told.Load())
			}
			// The last member leaves (a rebalance: the group empties); its
			// write is held at the store.
			e.unloadCounted(how, p, "leave", told, func() int16 { return hb(-1).ErrorCode })
			if how == "close" {
				return
			}
			e.c.Acquire(p)
			d := kmsg.NewPtrConsumerGroupDescribeRequest()
			d.Groups = []string{grp}
			if !testwait.Until(5*time.Second, func() bool {
				return e.do(d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode == 0
			}) {
				t.Fatal("not served again after Acquire")
			}
			if n := told.Load(); n != 2 {
				t.Fatalf("%d rebalances told after the partition loaded again, want 2", n)
			}
			part := e.c.parts[p]
			part.mu.Lock()
			kept := len(part.late)
			part.mu.Unlock()
			if kept != 0 {
				t.Fatalf("%d unloaded shards still kept", kept)
			}
		})
	}
}

// An unloaded shard kept for a write that was still queued at the unload
// (never handed to the store, so no result ever comes for it) is dropped
// once every batch of its generation has reported, even when the partition
// was acquired again and the batch that reports last is of the new
// generation. Before, the check ran only on a stale generation's result,
// and the unloaded shard stayed in partition.late for as long as the
// partition was served again.
func TestLateShardDroppedAfterReacquire(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	if err := e.c.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	const grp = "cg"
	p := PartitionFor(grp, 8)
	other := ""
	for i := 0; other == ""; i++ {
		if g := fmt.Sprintf("g%d", i); PartitionFor(g, 8) == p {
			other = g
		}
	}
	hb := func(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse { return e.cgHeartbeat(grp, "a", epoch) }
	if r := hb(0); r.ErrorCode != 0 {
		t.Fatalf("join: code %d", r.ErrorCode)
	}
	part := e.c.parts[p]
	locked := func(f func() bool) func() bool {
		return func() bool {
			part.mu.Lock()
			defer part.mu.Unlock()
			return f()
		}
	}
	release := holdAppends(st)
	t.Cleanup(release)
	// maxInflight batches of simple commits in flight, held at the store.
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for i := range maxInflight {
		wg.Add(1)
		go func() { defer wg.Done(); e.do(commitRequest(other, "", -1, "t", int64(i))) }()
		if !testwait.Until(5*time.Second, locked(func() bool { return part.inflight == i+1 })) {
			t.Fatalf("commit %d not handed over", i)
		}
	}
	// The last member leaves: a rebalance event whose write is queued
	// behind them.
	wg.Add(1)
	go func() { defer wg.Done(); hb(-1) }()
	if !testwait.Until(5*time.Second, locked(func() bool { return len(part.queued) > 0 })) {
		t.Fatal("the leave's write was not queued")
	}
	e.c.Release(p)
	e.c.Acquire(p)
	if !testwait.Until(5*time.Second, locked(func() bool { return part.state == stActive })) {
		t.Fatal("not served again after Acquire")
	}
	// A write of the new generation, queued behind the old batches: it is
	// handed over once the first of them reports, and reports last.
	committed := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() { committed <- e.do(commitRequest(other, "", -1, "u", 1)).(*kmsg.OffsetCommitResponse) }()
	if !testwait.Until(5*time.Second, locked(func() bool { return len(part.queued) > 0 })) {
		t.Fatal("the new generation's commit was not queued")
	}
	release()
	if r := <-committed; r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit after the reload: code %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	wg.Wait()
	if !testwait.Until(5*time.Second, locked(func() bool { return part.inflight == 0 })) {
		t.Fatal("batches still in flight")
	}
	part.mu.Lock()
	kept := len(part.late)
	part.mu.Unlock()
	if kept != 0 {
		t.Fatalf("%d unloaded shards still kept with nothing of theirs in flight", kept)
	}
}

// cgHeartbeat sends a consumer group heartbeat of member at epoch (0: join,
// -1: leave), subscribed to topic t, and returns its answer.
func (e *env) cgHeartbeat(grp, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
	e.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, grp, member, epoch
	r.RebalanceTimeoutMillis = 60000
	r.SubscribedTopicNames = []string{"t"}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return e.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// A classic group's rebalance whose completing write (the leader's
// assignment) is in flight when its partition is released or the
// coordinator closes is counted by this node once the write is durable, and
// the node that loads the partition next finds it in the group's history,
// beside the assignment it completed. Before, the event was recorded only
// once the assignment was durable, in a write an unloaded shard never
// issued: no node counted the rebalance and the stored history lacked it.
func TestClassicRebalanceInFlightAtUnloadCounted(t *testing.T) {
	for _, how := range []string{"release", "close"} {
		t.Run(how, func(t *testing.T) {
			e, told := countingEnv(t)
			const grp = "g"
			p := PartitionFor(grp, 8)
			member, _ := e.joinOne(grp)
			if n := told.Load(); n != 1 {
				t.Fatalf("%d rebalances told after the first generation, want 1", n)
			}
			// The member rejoins (a rebalance); the leader's assignment
			// write is held at the store.
			r := e.do(joinReq(grp, member, 9)).(*kmsg.JoinGroupResponse)
			if r.ErrorCode != 0 {
				t.Fatalf("rejoin: %d", r.ErrorCode)
			}
			s := kmsg.NewPtrSyncGroupRequest()
			s.Version, s.Group, s.MemberID, s.Generation = 5, grp, member, r.Generation
			pt, pn := "consumer", "range"
			s.ProtocolType, s.Protocol = &pt, &pn
			s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("B")}}
			e.unloadCounted(how, p, "sync", told, func() int16 { return e.do(s).(*kmsg.SyncGroupResponse).ErrorCode })
			if how == "close" {
				return
			}
			e.c.Acquire(p)
			d := kmsg.NewPtrDescribeGroupsRequest()
			d.Version, d.Groups = 5, []string{grp}
			group.RequestHistory(d, -1)
			var doc *group.HistoryDoc
			if !testwait.Until(5*time.Second, func() bool {
				g := e.do(d).(*kmsg.DescribeGroupsResponse).Groups[0]
				if g.ErrorCode != 0 {
					return false
				}
				doc, _ = group.HistoryTagOf(&g)
				return doc != nil
			}) {
				t.Fatal("not served again after Acquire")
			}
			if len(doc.History) != 2 || doc.History[1].Generation != r.Generation || doc.History[1].Outcome != "stable" {
				t.Fatalf("loaded history %+v, want 2 events, the second stable at generation %d", doc.History, r.Generation)
			}
			if n := told.Load(); n != 2 {
				t.Fatalf("%d rebalances told after the partition loaded again, want 2", n)
			}
		})
	}
}

// unloadCounted sends a request (send, returning its error code) whose
// write completes a rebalance, holds that write at the store, unloads
// partition p meanwhile the way how says ("release": the partition moves
// to another node; "close": the node stops, the coordinator's loop
// unloading the partition as it exits), then lets the write through. The
// request must be answered NOT_COORDINATOR (the partition was unloaded
// first), and the rebalance, the second told, told only once the write is
// durable.
func (e *env) unloadCounted(how string, p int32, what string, told *atomic.Int32, send func() int16) {
	e.t.Helper()
	release := holdAppends(e.st)
	e.t.Cleanup(release)
	answered := make(chan int16, 1)
	go func() { answered <- send() }()
	if !testwait.Until(5*time.Second, func() bool { return e.st.held.Load() > 0 }) {
		e.t.Fatalf("the %s's write did not reach the store", what)
	}
	closed := make(chan struct{})
	switch how {
	case "release":
		e.c.Release(p)
		close(closed)
	case "close":
		go func() { e.c.Close(); close(closed) }()
		part := e.c.parts[p]
		if !testwait.Until(5*time.Second, func() bool {
			part.mu.Lock()
			defer part.mu.Unlock()
			return part.closed
		}) {
			e.t.Fatal("the partition was not closed")
		}
	default:
		e.t.Fatalf("unloadCounted: unknown way %q", how)
	}
	if n := told.Load(); n != 1 {
		e.t.Fatalf("%d rebalances told before the write's outcome, want 1", n)
	}
	release()
	if code := <-answered; code != group.ErrNotCoordinator {
		e.t.Fatalf("%s answered %d, want NOT_COORDINATOR (the partition was unloaded first)", what, code)
	}
	<-closed
	if !testwait.Until(5*time.Second, func() bool { return told.Load() == 2 }) {
		e.t.Fatalf("%d rebalances told once the write was durable, want 2", told.Load())
	}
}

// countingEnv is a loaded coordinator on a gateStore whose OnRebalance
// counts the rebalances told.
func countingEnv(t *testing.T) (*env, *atomic.Int32) {
	t.Helper()
	told := new(atomic.Int32)
	e := newEnvWith(t, newGateStore(), nil, func(c *group.Config) {
		c.OnRebalance = func(group.RebalanceEvent) { told.Add(1) }
	})
	if err := e.c.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, told
}
