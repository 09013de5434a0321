package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

const (
	k848Prefix = "/k848/"
	k848Parts  = 4
)

// startCluster848 starts n in-process cluster-mode nodes (ids 1..n) on etcd
// with a short consumer heartbeat interval, and waits until their
// coordinator partitions have settled. Node 1 reaches etcd through
// node1Etcd if given.
func startCluster848(t *testing.T, ec *etcdtest.Cluster, n int, node1Etcd []string) []*Node {
	t.Helper()
	return startCluster848Clock(t, ec, n, node1Etcd, nil)
}

// startCluster848Clock is startCluster848 with node1Clock, if not nil, as
// node 1's cluster clock (expireLease).
func startCluster848Clock(t *testing.T, ec *etcdtest.Cluster, n int, node1Etcd []string, node1Clock *leaseClock) []*Node {
	t.Helper()
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond
	var ns []*Node
	for i := 1; i <= n; i++ {
		eps := ec.Endpoints()
		if i == 1 && node1Etcd != nil {
			eps = node1Etcd
		}
		cc := &ClusterConfig{Endpoints: eps, Prefix: k848Prefix, LeaseTTL: testLeaseTTL}
		if i == 1 && node1Clock != nil {
			cc.clock = node1Clock
		}
		nd, err := Start(Config{Listen: "127.0.0.1:0", NodeID: int32(i), ClusterID: "test", Partitions: k848Parts, Group: cfg,
			Logger:  slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Cluster: cc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() }) // a second Close is harmless
		ns = append(ns, nd)
	}
	waitClusterSettled(t, 20*time.Second, ns...)
	return ns
}

// waitClusterSettled waits (bounded) until every node sees every coordinator
// partition held by its target owner.
func waitClusterSettled(t *testing.T, within time.Duration, ns ...*Node) {
	t.Helper()
	testwait.For(t, within, "cluster settled", func() bool {
		for _, n := range ns {
			if !n.Cluster().Settled() {
				return false
			}
		}
		return true
	})
}

// groupOwnedBy is a group id whose coordinator partition node id holds, in
// n's view.
func groupOwnedBy(t *testing.T, n *Node, id int32, prefix string) string {
	t.Helper()
	for i := 0; i < 10000; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		if n.Cluster().Owner(coordinator.PartitionFor(g, k848Parts)) == id {
			return g
		}
	}
	t.Fatalf("no group id coordinated by node %d", id)
	return ""
}

// clusterCase848 runs a consumer-protocol group on a three-node cluster
// whose coordinator is node 1, on a catalog topic created through node 3
// (the catalog reaches the other nodes through etcd: the consumers get its
// partitions from node 1). takeDown then removes node 1 as the group's
// coordinator; the group's partition moves to a surviving node, which
// loads the group from etcd. The consumers follow through FindCoordinator
// and stay the same members: same epochs and assignments
// (ConsumerGroupDescribe through the survivors), no partition revoked,
// lost or ever owned by two consumers (their callbacks), offsets intact and
// their epoch-fenced commits accepted by the new coordinator.
func clusterCase848(t *testing.T, ec *etcdtest.Cluster, node1Etcd []string, node1Clock *leaseClock, takeDown func(ns []*Node) (alive []*Node)) {
	ns := startCluster848Clock(t, ec, 3, node1Etcd, node1Clock)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gid := groupOwnedBy(t, ns[1], 1, "g848-cluster")
	if _, err := ns[2].Catalog().Create("work", 6, nil); err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, n := range ns {
		all = append(all, n.Addr())
	}
	seeds := all[1:] // the survivors
	g := start848(t, ctx, all, gid, "work", "a", "b", "c")
	before := g.settle(seeds, 6, 15*time.Second)

	// Follow who holds the group's partition, in node 2's view.
	p := coordinator.PartitionFor(gid, k848Parts)
	holders := make(chan []int32, 1)
	stopWatch := make(chan struct{})
	go func() {
		seen := []int32{1}
		for i := 0; i < 6000; i++ { // 30 s at most
			if o := ns[1].Cluster().Owner(p); o != seen[len(seen)-1] {
				seen = append(seen, o)
			}
			select {
			case <-stopWatch:
				holders <- seen
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		holders <- seen
	}()
	start := time.Now()
	alive := takeDown(ns)
	// The group's partition reaches a survivor, then the cluster settles.
	var o int32
	if !testwait.Until(20*time.Second, func() bool { o = ns[1].Cluster().Owner(p); return o == 2 || o == 3 }) {
		t.Fatalf("partition %d of group %s still with node %d after %v", p, gid, o, time.Since(start))
	}
	moved := time.Since(start)
	waitClusterSettled(t, 20*time.Second, alive...)
	g.checkUnchanged(seeds, before, 25*time.Second)
	close(stopWatch)
	t.Logf("group partition with a survivor %v after node 1 went, group back as it was after %v; holders of the partition: %v",
		moved, time.Since(start), <-holders)
}

// TestKIP848ClusterCoordinatorStops: clusterCase848 where node 1 stops
// (node.Close: it hands its partitions over and revokes its lease).
func TestKIP848ClusterCoordinatorStops(t *testing.T) {
	clusterCase848(t, etcdtest.Start(t, 1), nil, nil, func(ns []*Node) []*Node {
		if err := ns[0].Close(); err != nil {
			t.Fatal(err)
		}
		return ns[1:]
	})
}

// TestKIP848ClusterCoordinatorLeaseExpires: clusterCase848 where node 1
// loses etcd (its connection goes through a proxy that the test cuts) while
// its process and Kafka listener keep running: its lease expires in etcd
// (registration and partition ownerships gone), it presumes so itself and
// stops serving the group, and a survivor takes the group over from the
// stored records, as after a crash. The consumers' connections to node 1
// still work, so they are told NOT_COORDINATOR rather than refused. The
// lease runs out when the test says (expireLease) rather than after a
// wall-clock TTL: a short lease would also run out whenever the test
// process stalls for a second.
func TestKIP848ClusterCoordinatorLeaseExpires(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	clk := &leaseClock{}
	clusterCase848(t, ec, []string{"http://" + px.Addr()}, clk, func(ns []*Node) []*Node {
		px.Cut()
		expireLease(t, ec, k848Prefix, 1, clk, testLeaseTTL, ns[0])
		return ns[1:]
	})
}
