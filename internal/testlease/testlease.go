// Package testlease ends the etcd lease of a cluster-mode node when a test
// says so, instead of after the lease's TTL of wall-clock time: Revoke is
// etcd's side (what etcd does when the TTL runs out: the node's
// registration and the partition keys attached to the lease go), Clock is
// the node's own (a cluster clock the test moves past the lease's
// deadline, given to an in-process node with nodehook.SetClusterClock).
package testlease

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/clock"
)

// Of returns the lease of node id's registration under prefix (the key
// prefix + "nodes/" + id, which package cluster attaches to the node's
// lease); the test fails if the node has none.
func Of(t testing.TB, cli *clientv3.Client, prefix string, id int32) clientv3.LeaseID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, prefix+"nodes/"+strconv.Itoa(int(id)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 || r.Kvs[0].Lease == 0 {
		t.Fatalf("node %d has no registration under %s", id, prefix)
	}
	return clientv3.LeaseID(r.Kvs[0].Lease)
}

// Revoke revokes, in etcd, the lease of node id's registration under
// prefix, as etcd does when the lease runs out: the registration and the
// partition keys the node held go at once, and the other nodes take its
// partitions over. A node still running learns it at its next keepalive
// (refused), and its writes are fenced from then on.
func Revoke(t testing.TB, cli *clientv3.Client, prefix string, id int32) {
	t.Helper()
	lease := Of(t, cli, prefix, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Revoke(ctx, lease); err != nil {
		t.Fatalf("revoking node %d's lease: %v", id, err)
	}
}

// Clock is the cluster clock of a node whose lease loss the test decides:
// its timers are the wall clock's, its time is the wall clock's shifted by
// what the test added (Jump), or stands still once frozen (Freeze). A jump
// by the lease's TTL makes the node see its lease's deadline pass at its
// next check (every 250 ms), as a node cut off from etcd for a TTL does; a
// frozen clock keeps the node's lease valid in its own view however slowly
// the test runs. The zero Clock runs with the wall clock.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
	frozen time.Time
}

var _ clock.Clock = (*Clock)(nil)

// Now is the wall clock's time plus the jumps, or the frozen time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.frozen.IsZero() {
		return c.frozen
	}
	return time.Now().Add(c.offset)
}

// NewTimer is the wall clock's timer: a jump does not fire timers early,
// the node notices it at its next periodic check.
func (c *Clock) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

// Jump moves the clock d forward.
func (c *Clock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	if !c.frozen.IsZero() {
		c.frozen = c.frozen.Add(d)
	}
}

// Freeze stops the clock at its current time.
func (c *Clock) Freeze() {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen = now
}
