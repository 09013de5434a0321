package node

import (
	"context"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/internal/testlease"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// testLeaseTTL is the etcd lease of the nodes of the cluster-mode tests in
// which no lease is meant to run out. A node presumes its lease lost when
// it has had no keepalive answered for about TTL - TTL/3 (the renewal
// interval) - TTL/10 (the safety margin), so a 2 s lease was lost by a
// test process that did not run for about 1.1 s, which a loaded 2-core CI
// machine can do; 10 s leaves about 5.7 s. A healthy node's lease is
// revoked when it closes, so a longer lease costs such tests nothing.
const testLeaseTTL = 10 * time.Second

// authLeaseTTL is the lease of a node under which a test turns etcd's
// authentication on (the node has no etcd user): from then on the node's
// keepalives are refused, and holdLease keeps the lease alive instead,
// once etcd's authentication is on and its root user logged in (bcrypt).
// The lease must outlast that: at least 20 s after the node's last
// answered keepalive, which was at most TTL/3 before.
const authLeaseTTL = 30 * time.Second

// leaseClock is the cluster clock of a node whose lease loss the test
// decides (testlease.Clock): Jump by the TTL makes the node presume its
// lease lost at its next check, Freeze keeps it valid in the node's view.
type leaseClock = testlease.Clock

// expireLease makes node id's lease run out now, the two sides of it in
// the order a real expiry has them: the node, cut off from etcd, presumes
// its lease lost (its clock clk jumps by ttl, so it stops serving), then
// etcd expires it (the test revokes the lease the node registered with,
// which deletes its registration and the partition keys it held). It
// replaces waiting a wall-clock TTL, so the node's lease can be long
// until the test ends it. clk nil: the node is not running (killed), only
// etcd's side is needed.
func expireLease(t *testing.T, ec *etcdtest.Cluster, prefix string, id int32, clk *leaseClock, ttl time.Duration, n *Node) {
	t.Helper()
	if clk != nil {
		clk.Jump(ttl)
		testwait.For(t, 10*time.Second, "node "+strconv.Itoa(int(id))+" presumes its lease lost", func() bool { return !n.Cluster().Serving() })
	}
	revokeNodeLease(t, ec, prefix, id)
}

// revokeNodeLease revokes, in etcd, the lease of node id's registration
// under prefix, as etcd does when the lease runs out.
func revokeNodeLease(t testing.TB, ec *etcdtest.Cluster, prefix string, id int32) {
	t.Helper()
	testlease.Revoke(t, ec.Client(t), prefix, id)
}

// holdLease keeps node id's lease alive in etcd, through a client logged in
// as etcd's root user (rootPassword), until the test ends: for tests that
// turn etcd's authentication on under a node without an etcd user, whose
// own keepalives are refused from then on. etcd would otherwise expire the
// lease a TTL after the node's last answered keepalive, and the node, which
// still sees the deletion of its keys through the watch it opened before,
// would stop serving at a moment set by the machine's speed. It returns
// once etcd has answered the first keepalive.
func holdLease(t *testing.T, ec *etcdtest.Cluster, prefix string, id int32, rootPassword string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), Username: "root", Password: rootPassword,
		DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); cli.Close() })
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	defer gcancel()
	lease := testlease.Of(t, cli, prefix, id)
	if _, err := cli.KeepAliveOnce(gctx, lease); err != nil {
		t.Fatalf("holding node %d's lease: %v", id, err)
	}
	answers, err := cli.KeepAlive(ctx, lease)
	if err != nil {
		t.Fatalf("holding node %d's lease: %v", id, err)
	}
	go func() {
		for range answers { // drained until the test ends
		}
	}()
}
