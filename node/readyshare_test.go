package node

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestClusterReadyWaitsForItsShare: a node that joins a cluster is not
// ready while the partitions the cluster assigns to it are still held by
// another node. Node 1 holds every partition and is cut off from etcd (with
// a lease long enough to outlast the test's checks), so it cannot hand half
// of them to node 2, which starts meanwhile: node 2 has a lease and serves
// nothing, and /readyz must say 503 (before, it answered 200 "ok", a node
// serving none being ready), so that an operator restarting the nodes one
// at a time does not stop the next one while this one's share is still on
// its way. Once node 1 reaches etcd again it hands the share over and node 2
// becomes ready.
func TestClusterReadyWaitsForItsShare(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	start := func(id int32, eps []string, ttl time.Duration) *Node {
		cfg := group.Defaults()
		cfg.InitialRebalanceDelay = 0
		nd, err := Start(Config{Listen: "127.0.0.1:0", NodeID: id, ClusterID: "test", Partitions: k848Parts, Group: cfg,
			Logger:  slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Cluster: &ClusterConfig{Endpoints: eps, Prefix: "/readyshare/", LeaseTTL: ttl, CompactionInterval: -1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		return nd
	}
	n1 := start(1, []string{px.Addr()}, 60*time.Second)
	waitClusterSettled(t, 20*time.Second, n1)
	if got := len(n1.Cluster().OwnedPartitions()); got != k848Parts {
		t.Fatalf("node 1 alone serves %d partitions, want %d", got, k848Parts)
	}
	px.Cut()
	n2 := start(2, ec.Endpoints(), testLeaseTTL)
	// Node 2 has its lease and sees both nodes registered and node 1
	// holding every partition.
	testwait.For(t, 20*time.Second, "node 2 registered beside node 1", func() bool {
		return n2.Cluster().Serving() && len(n2.Cluster().Brokers()) == 2 && n2.Cluster().Owner(0) == 1
	})
	if len(n2.Cluster().OwnedPartitions()) != 0 {
		t.Fatalf("node 2 serves %v while node 1 is cut off", n2.Cluster().OwnedPartitions())
	}
	ok, why := n2.Ready()
	if ok {
		t.Fatalf("node 2 ready (%q) while its share of the partitions is still held by node 1", why)
	}
	if !strings.Contains(why, "not yet handed over") {
		t.Errorf("node 2 not ready, but says %q", why)
	}
	t.Logf("node 2 while its share is held by node 1: %s", why)
	px.Restore()
	testwait.For(t, 30*time.Second, "node 2 ready once node 1 hands its share over", func() bool {
		ok, _ := n2.Ready()
		return ok
	})
	if len(n2.Cluster().OwnedPartitions()) == 0 {
		t.Error("node 2 ready serving no partition")
	}
}
