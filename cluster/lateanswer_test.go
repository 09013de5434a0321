package cluster

import (
	"context"
	"testing"
	"time"
)

// answeredThen is a LeaseStore whose KeepAlive runs then after the store has
// answered and before the answer reaches the caller.
type answeredThen struct {
	LeaseStore
	then func()
}

func (a answeredThen) KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error) {
	ttl, err := a.LeaseStore.KeepAlive(ctx, id)
	if a.then != nil {
		a.then()
	}
	return ttl, err
}

// TestSimLateKeepAliveAnswerAfterSessionEnd: a keepalive answer that comes in
// while the session ends (run releases everything and forgets the lease on
// one goroutine while the keepalive goroutine still holds the answer) does
// not make the node serve again: it has no lease and no partitions, and its
// view is no longer followed, so it must keep answering as a node without a
// lease (Serving false, COORDINATOR_NOT_AVAILABLE) until a new session
// begins. The answer used to move the deadline forward again after the
// session had cleared it, and the node claimed a valid lease for a TTL.
func TestSimLateKeepAliveAnswerAfterSessionEnd(t *testing.T) {
	s := startSim(t, 3, 3*time.Second)
	v := s.node(1)
	if !v.c.Serving() || len(v.c.OwnedPartitions()) == 0 {
		t.Fatal("node 1 does not serve after settling")
	}
	v.c.ls = answeredThen{LeaseStore: v.c.ls, then: func() { s.end(v) }}
	if err := v.c.renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v.c.Serving() {
		t.Fatalf("after its session ended the node serves again (deadline %v, lease %d, partitions %v)",
			v.c.deadlineTime().Sub(simStart), v.c.View().Lease, v.c.OwnedPartitions())
	}
	if b, code := v.c.Coordinator("g-0"); code != 15 {
		t.Fatalf("Coordinator(g-0) after the session ended: node %d, code %d; want 15", b.NodeID, code)
	}
}
