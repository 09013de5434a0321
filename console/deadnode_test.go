package console

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cohort-dev/cohort/cluster"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestGroupsPageWithADeadNode: right after a node of a cluster dies
// (SIGKILL, a crashed host) it stays in the registry, so in Metadata, until
// its lease ends, and the console's ListGroups, sent to every node, cannot
// reach it. The groups page lists the groups of the nodes that answer and
// says which node it could not reach; before, it was a 502 ("Listing the
// groups failed: ... unable to dial") for as long as the lease lasted, the
// moment an operator opens the console. Node 2 here is a registration with
// an address nothing listens on, under a lease that outlives the test. The
// counts are those of node 1's partitions, and the page names node 2's as
// not counted.
func TestGroupsPageWithADeadNode(t *testing.T) {
	n, ids, port, mine := nodeWithDeadPeer(t, "/console-dead/")
	body := groupsPageOfNodeOne(t, n, ids, mine)
	if want := fmt.Sprintf("node 2 (127.0.0.1:%d) could not be reached", port); !strings.Contains(body, want) {
		t.Errorf("the page does not say %q:\n%s", want, body)
	}
}

// TestGroupsPageWithANodeTheClientDoesNotKnow: a node that joins the
// cluster after the page's client asked for Metadata, and that the node kgo
// then asks for brokers does not know yet (its view lags), is named by the
// console's own node but unknown to the client: asking it fails with kgo's
// "unknown broker", which made the whole groups page a 502. The page now
// lists the other nodes' groups and says which node was not asked. kgo is
// made not to know node 2 by asking it under an id no node has.
func TestGroupsPageWithANodeTheClientDoesNotKnow(t *testing.T) {
	n, ids, port, mine := nodeWithDeadPeer(t, "/console-unknown/")
	clientDoesNotKnow(t, 2)
	body := groupsPageOfNodeOne(t, n, ids, mine)
	if want := fmt.Sprintf("node 2 (127.0.0.1:%d) was not asked: it joined the cluster as the page loaded", port); !strings.Contains(body, want) {
		t.Errorf("the page does not say %q:\n%s", want, body)
	}
	if strings.Contains(body, `class="error unreachable"`) {
		t.Errorf("the page says node 2 could not be reached, which was not tried:\n%s", body)
	}
}

// clientDoesNotKnow makes the console's requests to node id fail as to a
// node the page's client does not know (kgo's "unknown broker"), for the
// rest of the test: nodeBroker asks it under an id no node has.
func clientDoesNotKnow(t *testing.T, id int32) {
	was := nodeBroker
	t.Cleanup(func() { nodeBroker = was })
	nodeBroker = func(cl *kgo.Client, node int32) *kgo.Broker {
		if node == id {
			node += 1000
		}
		return was(cl, node)
	}
}

// deadPeerParts is the coordinator partitions of nodeWithDeadPeer's cluster.
const deadPeerParts = 4

// nodeWithDeadPeer starts node 1 of a cluster on an embedded etcd (under
// prefix) with groups ids, and registers node 2 at an address nothing
// listens on, under a lease that outlives the test: node 1 hands over node
// 2's share of the partitions and keeps mine.
func nodeWithDeadPeer(t *testing.T, prefix string) (n *node.Node, ids []string, port int, mine map[int32]bool) {
	t.Helper()
	ec := etcdtest.Start(t, 1)
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	var err error
	n, err = node.Start(node.Config{Listen: "127.0.0.1:0", NodeID: 1, ClusterID: "console", Partitions: deadPeerParts, Group: gcfg,
		HTTPListen: "127.0.0.1:0", HTTPHandlers: Register,
		Logger:  slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		Cluster: &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	testwait.For(t, 20*time.Second, "node 1 serving every partition", func() bool {
		return len(n.Cluster().OwnedPartitions()) == deadPeerParts
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n, false))
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("app-%d", i)
		ids = append(ids, id)
		commit(ctx, t, adm, id, "orders", 1)
	}

	// Node 2 "dies" registered: nothing listens at its address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ls := cluster.EtcdLeases{Client: ec.Client(t), Prefix: prefix}
	lease, _, err := ls.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := ls.Register(ctx, 2, fmt.Appendf(nil, `{"id":2,"host":"127.0.0.1","port":%d}`, port), lease); err != nil || !ok {
		t.Fatalf("registering node 2: %v %v", ok, err)
	}
	t.Cleanup(func() { ls.Revoke(context.Background(), lease) })
	share := 0
	for _, id := range cluster.Assign(deadPeerParts, []int32{1, 2}) {
		if id == 1 {
			share++
		}
	}
	testwait.For(t, 20*time.Second, "node 1 seeing node 2 and handing its share over", func() bool {
		return len(n.Cluster().Brokers()) == 2 && len(n.Cluster().OwnedPartitions()) == share
	})
	mine = map[int32]bool{}
	for _, p := range n.Cluster().OwnedPartitions() {
		mine[p] = true
	}
	if len(mine) == 0 || len(mine) == deadPeerParts {
		t.Fatalf("node 1 serves %d of %d partitions", len(mine), deadPeerParts)
	}
	return n, ids, port, mine
}

// groupsPageOfNodeOne is node 1's groups page (nodeWithDeadPeer), checked
// to be a 200 that lists the groups of node 1's partitions, counts those it
// lists and names node 2's partitions as not counted.
func groupsPageOfNodeOne(t *testing.T, n *node.Node, ids []string, mine map[int32]bool) string {
	t.Helper()
	code, body := get(t, "http://"+n.HTTPAddr()+"/console/", "", "")
	if code != http.StatusOK {
		t.Fatalf("groups page without node 2: %d\n%s", code, body)
	}
	listed := 0
	for _, id := range ids {
		served := mine[coordinator.PartitionFor(id, deadPeerParts)]
		has := strings.Contains(body, `data-group="`+id+`"`)
		if served && !has {
			t.Errorf("group %s, on node 1's partition, is not listed", id)
		}
		if has {
			listed++
		}
	}
	if listed == 0 {
		t.Fatalf("no group listed:\n%s", body)
	}
	// The counts are node 1's partitions' only, and the page names the
	// others as not counted.
	var others []string
	for p := range int32(deadPeerParts) {
		if !mine[p] {
			others = append(others, fmt.Sprint(p))
		}
	}
	plural := "s"
	if len(others) == 1 {
		plural = ""
	}
	if want := fmt.Sprintf("the groups of coordinator partition%s %s (of %d) are neither counted nor listed", plural, strings.Join(others, ", "), deadPeerParts); !strings.Contains(body, want) {
		t.Errorf("the page does not say %q:\n%s", want, body)
	}
	if want := fmt.Sprintf("%d of %d groups", listed, listed); !strings.Contains(body, want) {
		t.Errorf("the page does not say %q:\n%s", want, body)
	}
	return body
}
