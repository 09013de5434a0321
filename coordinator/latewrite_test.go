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
			var told atomic.Int32
			st := newGateStore()
			e := newEnvWith(t, st, nil, func(c *group.Config) {
				c.OnRebalance = func(group.RebalanceEvent) { told.Add(1) }
			})
			if err := e.c.WaitLoaded(context.Background()); err != nil {
				t.Fatal(err)
			}
			const grp = "cg"
			p := PartitionFor(grp, 8)
			hb := func(epoch int32) *kmsg.ConsumerGroupHeartbeatResponse { return e.cgHeartbeat(grp, "a", epoch) }
			if r := hb(0); r.ErrorCode != 0 || told.Load() != 1 {
				t.Fatalf("join: code %d, %d rebalances told; want 0, 1", r.ErrorCode, told.Load())
			}
			// The last member leaves (a rebalance: the group empties); its
			// write is held at the store.
			release := holdAppends(st)
			t.Cleanup(release)
			left := make(chan *kmsg.ConsumerGroupHeartbeatResponse, 1)
			go func() { left <- hb(-1) }()
			if !testwait.Until(5*time.Second, func() bool { return st.held.Load() > 0 }) {
				t.Fatal("the leave's write did not reach the store")
			}
			closed := make(chan struct{})
			switch how {
			case "release":
				e.c.Release(p)
				close(closed)
			case "close":
				go func() { e.c.Close(); close(closed) }()
				// Its loop unloads the partition as it exits, the write
				// still held.
				part := e.c.parts[p]
				if !testwait.Until(5*time.Second, func() bool {
					part.mu.Lock()
					defer part.mu.Unlock()
					return part.closed
				}) {
					t.Fatal("the partition was not closed")
				}
			}
			if n := told.Load(); n != 1 {
				t.Fatalf("%d rebalances told before the write's outcome, want 1", n)
			}
			release()
			if r := <-left; r.ErrorCode != group.ErrNotCoordinator {
				t.Fatalf("leave answered %d, want NOT_COORDINATOR (the partition was unloaded first)", r.ErrorCode)
			}
			<-closed
			if !testwait.Until(5*time.Second, func() bool { return told.Load() == 2 }) {
				t.Fatalf("%d rebalances told once the write was durable, want 2", told.Load())
			}
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
