package console

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/cluster"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/nodehook"
	"github.com/cohort-dev/cohort/internal/testlease"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// groupsCount and groupsRow read the groups page: its "N of M groups" and
// the id of each row.
var (
	groupsCount = regexp.MustCompile(`id="count">([0-9,]+) of ([0-9,]+) groups</p>`)
	groupsRow   = regexp.MustCompile(`<tr data-group="([^"]*)"`)
)

// pageTruth compares an unfiltered groups page with the groups that exist
// (want): it returns what differs ("" when the page shows exactly them,
// counted once each, with no partition left uncounted and every node
// reached, and no row carrying an error).
func pageTruth(body string, want []string) string {
	var diffs []string
	m := groupsCount.FindStringSubmatch(body)
	if m == nil {
		return "no count on the page"
	}
	shown, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	total, _ := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
	if shown != len(want) || total != len(want) {
		diffs = append(diffs, fmt.Sprintf("the page says %q, want %d of %d groups", m[0], len(want), len(want)))
	}
	listed := map[string]int{}
	for _, r := range groupsRow.FindAllStringSubmatch(body, -1) {
		listed[r[1]]++
	}
	for _, id := range want {
		if listed[id] != 1 {
			diffs = append(diffs, fmt.Sprintf("%s is listed %d times, want once", id, listed[id]))
		}
		delete(listed, id)
	}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		diffs = append(diffs, fmt.Sprintf("%s is listed but does not exist", id))
	}
	// A row's error is its description's (DescribeGroups at the group's
	// coordinator, or FindCoordinator).
	for _, bad := range []string{`id="uncounted"`, "could not be reached", `<span class="error">`} {
		if strings.Contains(body, bad) {
			diffs = append(diffs, "the page says "+bad)
		}
	}
	return strings.Join(diffs, "; ")
}

// TestGroupsPageCountsOnRealNodes: the groups page of a cluster of real
// nodes sharing their groups through etcd counts and lists exactly the
// groups that exist, while partitions move between the nodes.
//
// Three moments are checked. Settled on two nodes. Then node 2 is cut off
// from etcd with its lease clock stopped, so it goes on serving what it
// holds as it would until its lease ran out; one of its partitions is taken
// from it in etcd (its ownership key deleted) as node 3 joins, and node 3,
// its owner now, deletes some of its groups and creates one: node 2, still
// registered and reachable, answers the console with its stale count and
// groups of that partition, node 3 with the current ones, and the page must
// take the owner's (the larger, stale count is the one it must not take).
// Node 2's Metadata names nodes 1 and 2 only, so the page must also ask
// node 3, which its own node names, whichever node kgo asks for brokers.
// Last, node 2 closes (a clean hand-over) and node 3's lease is revoked
// (its partitions go to node 1 at once): the page converges to the same
// truth from the new owners.
func TestGroupsPageCountsOnRealNodes(t *testing.T) {
	testwait.WallClock(t, "three cluster-mode nodes on an embedded etcd")
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	const parts, prefix = 6, "/console-counts/"
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	start := func(id int32, cc *node.ClusterConfig) *node.Node {
		t.Helper()
		n, err := node.Start(node.Config{Listen: "127.0.0.1:0", NodeID: id, ClusterID: "console", Partitions: parts, Group: gcfg,
			HTTPListen: "127.0.0.1:0", HTTPHandlers: Register,
			Logger:  slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelError})),
			Cluster: cc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	n1 := start(1, &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL, CompactionInterval: -1})
	// Node 2 reaches etcd through a proxy the test cuts, and times its
	// lease by a clock the test stops. Its lease is long: cut off, it
	// sends no keepalive, and its registration must outlive the part of
	// the test in which it is cut off.
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	clk2 := &testlease.Clock{}
	cc2 := &node.ClusterConfig{Endpoints: []string{px.Addr()}, Prefix: prefix, LeaseTTL: 60 * time.Second, CompactionInterval: -1}
	nodehook.SetClusterClock(cc2, clk2)
	n2 := start(2, cc2)
	t.Cleanup(px.Restore) // before node 2's close: it hands over faster with etcd reachable
	settled := func(ns ...*node.Node) func() bool {
		return func() bool {
			for _, n := range ns {
				if !n.Cluster().Settled() || len(n.Cluster().Brokers()) != len(ns) {
					return false
				}
			}
			return true
		}
	}
	testwait.For(t, 20*time.Second, "nodes 1 and 2 settled", settled(n1, n2))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl1 := kafkaClient(t, n1, false)
	adm := kadm.NewClient(cl1)
	// The topic first, known to both nodes before a group commits on it:
	// a node learns it from etcd a moment after it is created, a commit
	// before then is refused (UNKNOWN_TOPIC_OR_PARTITION), and the retry
	// of such a commit made the test 5 s longer in about half its runs.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "both nodes knowing topic orders", func() bool {
		for _, id := range []int{1, 2} {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("orders")
			req.Topics = append(req.Topics, rt)
			resp, err := cl1.Broker(id).Request(ctx, req)
			if err != nil || len(resp.(*kmsg.MetadataResponse).Topics) != 1 || resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode != 0 {
				return false
			}
		}
		return true
	})
	var ids []string
	byPart := map[int32][]string{}
	for i := range 36 {
		id := fmt.Sprintf("count-%02d", i)
		commit(ctx, t, adm, id, "orders", 1)
		ids = append(ids, id)
		p := coordinator.PartitionFor(id, parts)
		byPart[p] = append(byPart[p], id)
	}
	page := func(n *node.Node) string {
		t.Helper()
		code, body := get(t, "http://"+n.HTTPAddr()+"/console/", "", "")
		if code != http.StatusOK {
			t.Fatalf("node %d's groups page: %d\n%s", n.Cluster().NodeID(), code, body)
		}
		return body
	}
	expect := func(what string, n *node.Node, want []string) {
		t.Helper()
		body := page(n)
		if diff := pageTruth(body, want); diff != "" {
			t.Fatalf("%s, node %d's groups page: %s\n%s", what, n.Cluster().NodeID(), diff, body)
		}
	}
	// converge waits (bounded) until n's page shows want.
	converge := func(what string, n *node.Node, want []string) {
		t.Helper()
		var diff string
		if !testwait.Until(20*time.Second, func() bool {
			// Every page is a 200, a node still loading partitions it
			// has just taken over included (they are then named as
			// not counted, and the page is asked again).
			diff = pageTruth(page(n), want)
			return diff == ""
		}) {
			t.Fatalf("%s, node %d's groups page: %s", what, n.Cluster().NodeID(), diff)
		}
	}
	expect("settled on nodes 1 and 2", n1, ids)
	expect("settled on nodes 1 and 2", n2, ids)

	// Node 2 is cut off, serving what it holds; node 3 joins, and the
	// partitions node 3 is to take from node 2 are taken from it in etcd,
	// as its lease's end would.
	before, after := cluster.Assign(parts, []int32{1, 2}), cluster.Assign(parts, []int32{1, 2, 3})
	var taken []int32 // from node 2, to node 3
	for p := range int32(parts) {
		if before[p] == 2 && after[p] == 3 {
			taken = append(taken, p)
		}
	}
	if len(taken) == 0 {
		t.Fatalf("no partition moves from node 2 to node 3 (%v, then %v)", before, after)
	}
	clk2.Freeze()
	px.Cut()
	for _, p := range taken {
		if o := n1.Cluster().Owner(p); o != 2 {
			t.Fatalf("partition %d is held by node %d, not node 2", p, o)
		}
		if _, err := cli.Delete(ctx, prefix+"own/"+strconv.Itoa(int(p))); err != nil {
			t.Fatal(err)
		}
	}
	n3 := start(3, &node.ClusterConfig{Endpoints: ec.Endpoints(), Prefix: prefix, LeaseTTL: testLeaseTTL, CompactionInterval: -1})
	testwait.For(t, 20*time.Second, "nodes 1 and 3 settled with node 3 holding what it takes from node 2", func() bool {
		for _, p := range taken {
			if !n3.Cluster().Owned(p) || n1.Cluster().Owner(p) != 3 {
				return false
			}
		}
		return n1.Cluster().Settled() && n3.Cluster().Settled() && len(n1.Cluster().Brokers()) == 3
	})
	for _, p := range taken {
		if !n2.Cluster().Owned(p) {
			t.Fatalf("node 2, cut off, no longer serves partition %d: nothing answers stale", p)
		}
	}

	// On node 3, the owner: every group of the taken partitions but their
	// first is deleted, and a new group is created in the first of them.
	cl3 := kafkaClient(t, n3, false)
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl3) // and kgo learns the brokers
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(meta.Topics, func(mt kmsg.MetadataResponseTopic) bool { return mt.Topic != nil && *mt.Topic == "orders" })
	if i < 0 {
		t.Fatalf("no topic orders in node 3's Metadata")
	}
	gone := map[string]bool{}
	del := kmsg.NewPtrDeleteGroupsRequest()
	for _, p := range taken {
		if len(byPart[p]) < 2 {
			t.Fatalf("partition %d has %d groups: nothing to delete", p, len(byPart[p]))
		}
		for _, id := range byPart[p][1:] {
			del.Groups = append(del.Groups, id)
			gone[id] = true
		}
	}
	resp, err := cl3.Broker(3).Request(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range resp.(*kmsg.DeleteGroupsResponse).Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			t.Fatalf("deleting %s on node 3: %v", g.Group, err)
		}
	}
	newID := ""
	for i := 0; newID == ""; i++ {
		if id := fmt.Sprintf("count-new-%d", i); coordinator.PartitionFor(id, parts) == taken[0] {
			newID = id
		}
	}
	// commitOn3 commits offset for group id on node 3, the owner.
	commitOn3 := func(id string, offset int64) {
		t.Helper()
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation = id, -1
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic, ot.TopicID = "orders", meta.Topics[i].TopicID // by name or by id, as the version sent needs
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = offset
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
		resp, err := cl3.Broker(3).Request(ctx, oc)
		if err != nil {
			t.Fatal(err)
		}
		if err := kerr.ErrorForCode(resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("committing for %s on node 3: %v", id, err)
		}
	}
	commitOn3(newID, 7)
	// The group kept of the first taken partition commits again on its
	// owner: node 2 still has its first offset (100).
	kept := byPart[taken[0]][0]
	commitOn3(kept, 42)
	// A consumer-protocol group is created there too: its page comes
	// from ConsumerGroupDescribe, which node 2 answers GROUP_ID_NOT_FOUND.
	cgID := ""
	for i := 0; cgID == ""; i++ {
		if id := fmt.Sprintf("count-cg-%d", i); coordinator.PartitionFor(id, parts) == taken[0] {
			cgID = id
		}
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = cgID, "m-1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r, err := cl3.Broker(3).Request(ctx, hb); err != nil || r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("ConsumerGroupHeartbeat for %s on node 3: %v %+v", cgID, err, r)
	}
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups = []string{cgID}
	r, err := cl3.Broker(3).Request(ctx, cgd)
	if err != nil || len(r.(*kmsg.ConsumerGroupDescribeResponse).Groups) != 1 {
		t.Fatalf("ConsumerGroupDescribe of %s on node 3: %v %+v", cgID, err, r)
	}
	cgState := r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].State
	truth := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return gone[id] })
	truth = append(truth, newID, cgID)
	// Node 2 answers with the groups it held: its answer must lose to
	// the owner's, on the page of each node that follows etcd. Nothing
	// changes from here until node 2 is let back, so every page must be
	// exact; several are asked for, as a page's requests may go to any
	// node, node 2 among them (its Metadata names nodes 1 and 2 only).
	// A group's page too: its state, offsets and configs are asked of
	// the coordinator the page's node names, not of whichever node kgo
	// asks for the coordinator (node 2 names itself, and answers with
	// the offsets it had, or none for a group created since).
	for range 16 {
		expect("node 2 cut off and answering stale", n1, truth)
		expect("node 2 cut off and answering stale", n3, truth)
		for _, n := range []*node.Node{n1, n3} {
			groupPageTruth(t, n, newID, "Empty", 7)
			groupPageTruth(t, n, kept, "Empty", 42)
			groupPageTruth(t, n, cgID, cgState, -1)
		}
	}

	// Node 2 comes back, lets the taken partitions go, then closes: its
	// partitions move to nodes 1 and 3.
	px.Restore()
	testwait.For(t, 20*time.Second, "node 2 letting the taken partitions go", func() bool {
		return !slices.ContainsFunc(taken, n2.Cluster().Owned)
	})
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 20*time.Second, "nodes 1 and 3 settled", settled(n1, n3))
	converge("node 2 closed", n1, truth)
	converge("node 2 closed", n3, truth)

	// Node 3's lease is revoked: node 1 takes its partitions at once (and
	// node 3 rejoins when it learns it, at a keepalive).
	revoked := testlease.Of(t, cli, prefix, 3)
	testlease.Revoke(t, cli, prefix, 3)
	testwait.For(t, 20*time.Second, "node 3's partitions held on another lease", func() bool {
		v := n1.Cluster().View()
		for p := range int32(parts) {
			if h, ok := v.Owners[p]; !ok || int64(h.Lease) == int64(revoked) {
				return false
			}
		}
		return n1.Cluster().Settled()
	})
	converge("node 3's lease revoked", n1, truth)
}

// groupPageTruth checks n's page of group id: a 200 in the given state,
// with offset as the one committed offset (orders, partition 0; -1: none),
// and no error on it.
func groupPageTruth(t *testing.T, n *node.Node, id, state string, offset int64) {
	t.Helper()
	code, body := get(t, "http://"+n.HTTPAddr()+"/console/groups/"+id, "", "")
	if code != http.StatusOK {
		t.Fatalf("node %d's page of group %s: %d\n%s", n.Cluster().NodeID(), id, code, body)
	}
	var diffs []string
	rows := groupOffsetRow.FindAllStringSubmatch(body, -1)
	switch want := strconv.FormatInt(offset, 10); {
	case offset < 0 && len(rows) != 0:
		diffs = append(diffs, fmt.Sprintf("offsets %v, want none", rows))
	case offset >= 0 && (len(rows) != 1 || rows[0][1] != "orders" || rows[0][2] != "0" || rows[0][3] != want):
		diffs = append(diffs, fmt.Sprintf("offsets %v, want orders/0 at %s", rows, want))
	}
	if !strings.Contains(body, `id="state">`+state+`</span>`) {
		diffs = append(diffs, "state is not "+state)
	}
	if strings.Contains(body, `class="error"`) {
		diffs = append(diffs, "the page shows an error")
	}
	if len(diffs) > 0 {
		t.Fatalf("node %d's page of group %s: %s\n%s", n.Cluster().NodeID(), id, strings.Join(diffs, "; "), body)
	}
}

// groupOffsetRow is a row of a group page's offsets: topic, partition,
// offset.
var groupOffsetRow = regexp.MustCompile(`<tr><td>([^<]*)</td><td class="num">([0-9]+)</td><td class="num">(-?[0-9]+)</td>`)
