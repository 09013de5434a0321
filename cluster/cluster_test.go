package cluster_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

func addrs(ns ...*node.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Addr())
	}
	return out
}

// TestSpreadAndTopology: three nodes split the 50 partitions 17/17/16, every
// node answers FindCoordinator with the same owner, and a node that does not
// own a group's partition answers NOT_COORDINATOR.
func TestSpreadAndTopology(t *testing.T) {
	ec := etcdtest.Start(t, 3)
	ns := []*node.Node{startNode(t, ec, 1, testLeaseTTL), startNode(t, ec, 2, testLeaseTTL), startNode(t, ec, 3, testLeaseTTL)}
	took := waitSettled(t, 30*time.Second, ns...)
	t.Logf("three nodes settled in %v", took)
	for _, n := range ns {
		if k := len(n.Cluster().OwnedPartitions()); k < 16 || k > 17 {
			t.Fatalf("node %s owns %d partitions", n.Addr(), k)
		}
	}
	cl := newClient(t, ns[0].Addr())
	ctx := context.Background()
	for _, g := range []string{"a", "b", "c", "group-42"} {
		owner := ns[0].Cluster().Owner(coordinator.PartitionFor(g, partitions))
		for _, n := range ns {
			if o := n.Cluster().Owner(coordinator.PartitionFor(g, partitions)); o != owner {
				t.Fatalf("group %s: nodes disagree on owner (%d vs %d)", g, o, owner)
			}
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = g
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 || resp.NodeID != owner {
			t.Fatalf("FindCoordinator(%s): %v %+v, want node %d", g, err, resp, owner)
		}
		// Ask a node that is not the owner directly.
		for _, n := range ns {
			if n.Cluster().Owner(coordinator.PartitionFor(g, partitions)) == owner {
				continue
			}
			other := newClient(t, n.Addr())
			hb := kmsg.NewPtrOffsetFetchRequest()
			hb.Group = g
			r, err := other.Request(ctx, kmsg.NewPtrMetadataRequest())
			if err != nil || len(r.(*kmsg.MetadataResponse).Brokers) != 3 {
				t.Fatalf("metadata: %v", err)
			}
			var nid int32
			for _, x := range r.(*kmsg.MetadataResponse).Brokers {
				if x.Port == portOf(n.Addr()) {
					nid = x.NodeID
				}
			}
			fr, err := other.Broker(int(nid)).Request(ctx, hb)
			if err != nil || fr.(*kmsg.OffsetFetchResponse).ErrorCode != 16 {
				t.Fatalf("OffsetFetch on a non-owner: %v %+v, want NOT_COORDINATOR", err, fr)
			}
			break
		}
	}
}

// TestEtcdMemberLossAndQuorum: losing one etcd member of three does not
// stop commits; losing quorum stops acknowledgements (clients get retriable
// errors); when quorum returns, service resumes and nothing acknowledged is
// lost.
func TestEtcdMemberLossAndQuorum(t *testing.T) {
	// A short lease on purpose: the quorum outage below (over 2 s)
	// outlasts the nodes' view of it (about TTL - TTL/3 - TTL/10 = 1.7 s
	// without an answered keepalive), so the nodes also stop serving
	// during the outage and must serve again after it, as they would in
	// a real one. The test waits for no lease to run out in etcd.
	const ttl = 3 * time.Second
	ec := etcdtest.Start(t, 3)
	ns := []*node.Node{startNode(t, ec, 1, ttl), startNode(t, ec, 2, ttl), startNode(t, ec, 3, ttl)}
	waitSettled(t, 30*time.Second, ns...)
	var groups []string
	for _, id := range []int32{1, 2, 3} {
		groups = append(groups, groupsOn(ns[0], id, "q", 2)...)
	}
	cm := startCommitter(t, addrs(ns...), groups)
	obs := newClient(t, addrs(ns...)...)
	cm.waitAcks(t, 100, 30*time.Second)

	ec.Stop(0)
	_, e0 := cm.counts()
	cm.waitAcks(t, 200, 30*time.Second)
	_, e1 := cm.counts()
	t.Logf("one etcd member down: commits continue (%d failed meanwhile)", e1-e0)

	ec.Stop(1) // quorum lost
	a0, eq0 := cm.counts()
	lostAt := time.Now()
	quiet := time.Now()
	testwait.For(t, 30*time.Second, "two seconds without an acknowledgement (no etcd quorum)", func() bool {
		if a, _ := cm.counts(); a != a0 {
			a0, quiet = a, time.Now()
		}
		return time.Since(quiet) >= 2*time.Second
	})
	// Clients must get retriable errors, not only silence: wait (bounded)
	// for the first, which under the race detector can come after the 2 s.
	var eq int
	testwait.Until(30*time.Second, func() bool {
		var a int
		a, eq = cm.counts()
		if a != a0 {
			t.Fatal("a commit was acknowledged without etcd quorum")
		}
		return eq != eq0
	})
	t.Logf("quorum lost for %v: no acknowledgement; %d retriable errors meanwhile", time.Since(lostAt), eq-eq0)
	if eq == eq0 {
		t.Fatal("no retriable error while quorum was lost")
	}
	back := time.Now()
	if err := ec.RestartAll(0, 1); err != nil {
		t.Fatal(err)
	}
	cm.waitAcks(t, 100, 60*time.Second)
	t.Logf("quorum back: commits acknowledged again %v after the restart began", time.Since(back))
	cm.verify(t, obs)
}

func portOf(addr string) int32 {
	_, port, _ := splitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return int32(p)
}

// TestFencingSIGSTOP: a real process (child node 1) is stopped with SIGSTOP
// while it coordinates a group and loses its lease while stopped (the test
// revokes it, as etcd does when the TTL runs out), the others take over,
// then it is resumed with SIGCONT: its first answer is NOT_COORDINATOR and
// the successor's state is untouched. Its lease is long, so the test waits
// for no TTL, and when it resumes its own clock still says the lease is
// valid: it must not act on that stale view (it learns of the loss from
// etcd, its keepalive refused and its partition keys gone). It learns that
// before the commit comes, so this test does not reach etcd's ownership
// compare on writes; node's TestClusterStaleOwnerWriteFencedByEtcd does.
func TestFencingSIGSTOP(t *testing.T) {
	ec := etcdtest.Start(t, 3)
	ns := []*node.Node{startNode(t, ec, 2, testLeaseTTL), startNode(t, ec, 3, testLeaseTTL)}
	ch := startChild(t, ec, 1, testLeaseTTL)
	waitSettled(t, 30*time.Second, ns...)
	g := groupsOn(ns[0], 1, "sigstop", 1)[0]
	ctx := context.Background()
	direct := newClient(t, ch.addr)
	if _, err := direct.Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatal(err)
	}
	commit := func(off int64, req func(kmsg.Request) (kmsg.Response, error)) int16 {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = g, -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: off}}}}
		resp, err := req(r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	viaChild := func(r kmsg.Request) (kmsg.Response, error) { return direct.Broker(1).Request(ctx, r) }
	var code int16 = -1
	testwait.Until(10*time.Second, func() bool { code = commit(10, viaChild); return code == 0 }) // the partition may still be loading
	if code != 0 {
		t.Fatalf("commit on the child owner: %d", code)
	}
	if err := ch.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	expireLease(t, ec, 1) // while it is stopped
	waitSettledWithout(t, 30*time.Second, 1, ns...)
	cl := newClient(t, addrs(ns...)...)
	code = -1
	testwait.Until(20*time.Second, func() bool {
		code = commit(20, func(r kmsg.Request) (kmsg.Response, error) { return cl.Request(ctx, r) })
		return code == 0
	})
	if code != 0 {
		t.Fatalf("commit on the successor: %d", code)
	}
	if err := ch.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if c := commit(999, viaChild); c != 16 {
		t.Fatalf("resumed process answered a commit with %d, want NOT_COORDINATOR (16)", c)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = g
	fetch.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	fr, err := fetch.RequestWith(ctx, cl)
	if err != nil || fr.Topics[0].Partitions[0].Offset != 20 {
		t.Fatalf("offset after the resumed process's write: %v %+v, want 20", err, fr)
	}
}
