package console

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/store/memstore"
)

// movingCluster is the moment of a coordinator partition's move between two
// cohort nodes, frozen: two real coordinators over one store, each serving
// the partitions it is told to, stand for the nodes' group coordinators.
// The console reaches them through a two-broker kfake cluster whose
// ListGroups answers are theirs (broker 0 answers as old, broker 1 as new),
// so the console's requests, filter and limit included, and the nodes'
// answers, counts included, are the real ones; what is fixed is only when
// each node answers relative to the move.
type movingCluster struct {
	st       *memstore.Store
	byBroker [2]*coordinator.Coordinator
	con      http.Handler
	ids      []string
	moving   int32 // the partition that moves
	inMoving int   // groups of ids in it
	addr     string
	// next, if set for a broker, becomes its coordinator once it has
	// answered one ListGroups (a move that ends between two requests).
	next [2]*coordinator.Coordinator
	// older, set for a broker, makes it answer as a node from before the
	// counts per partition (its totals only); asked counts the
	// ListGroups each broker answered.
	older [2]bool
	asked [2]atomic.Int32
}

const movingParts = 4

// newMovingCluster commits an offset for each of groups groups (app-00 ...)
// on a coordinator serving every partition.
func newMovingCluster(t *testing.T, groups int) *movingCluster {
	t.Helper()
	m := &movingCluster{st: memstore.New()}
	all := m.coordinator(t, func(int32) bool { return true })
	perPart := map[int32]int{}
	for i := range groups {
		id := fmt.Sprintf("app-%02d", i)
		commitOn(t, all, id)
		m.ids = append(m.ids, id)
		perPart[coordinator.PartitionFor(id, movingParts)]++
	}
	for p, n := range perPart { // the partition of most groups moves
		if n > m.inMoving || n == m.inMoving && p < m.moving {
			m.moving, m.inMoving = p, n
		}
	}
	all.Close()

	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "t"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(kmsg.ListGroups.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		node := m.byBroker[c.CurrentNode()]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := node.Handle(ctx, group.Client{}, req)
		b := c.CurrentNode()
		m.asked[b].Add(1)
		if err == nil && m.older[b] {
			resp = withoutPartitionCounts(resp.(*kmsg.ListGroupsResponse))
		}
		if m.next[b] != nil {
			m.byBroker[b], m.next[b] = m.next[b], nil
		}
		return resp, err, true
	})
	m.addr = c.ListenAddrs()[0]
	m.con = New(&proxyNode{addr: m.addr}, nil, slog.New(slog.NewTextHandler(testlog.Writer(t), nil)))
	return m
}

// ownedBy gives the console the cluster view of a node that sees broker 1
// own the moving partition and broker 0 the others (as the console's node
// reads the owners from etcd).
func (m *movingCluster) ownedBy(t *testing.T) { m.viewed(t, 1, false) }

// viewed gives the console the cluster view of a node that sees broker
// owner own the moving partition and broker 0 the others; noLease: the
// node has no lease, so that view is no longer followed.
func (m *movingCluster) viewed(t *testing.T, owner int32, noLease bool) {
	view := &ClusterView{Self: 0, Partitions: movingParts, NoLease: noLease, Nodes: []ClusterNode{{ID: 0}, {ID: 1}}}
	view.Nodes[owner].Owned = []int32{m.moving}
	for p := range int32(movingParts) {
		if p != m.moving {
			view.Nodes[0].Owned = append(view.Nodes[0].Owned, p)
		}
	}
	m.con = New(&proxyNode{addr: m.addr}, func() *ClusterView { return view }, slog.New(slog.NewTextHandler(testlog.Writer(t), nil)))
}

// firstInMoving is the first of ids in the moving partition.
func (m *movingCluster) firstInMoving() string {
	for _, id := range m.ids {
		if coordinator.PartitionFor(id, movingParts) == m.moving {
			return id
		}
	}
	return ""
}

// newInMoving is the first id app-new-N of a group in the moving partition.
func (m *movingCluster) newInMoving() string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("app-new-%d", i); coordinator.PartitionFor(id, movingParts) == m.moving {
			return id
		}
	}
}

// listOn is c's answer to a ListGroups (v5) with the filter f.
func listOn(t *testing.T, c *coordinator.Coordinator, f group.ListFilter) *kmsg.ListGroupsResponse {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	group.RequestListFilter(req, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Handle(ctx, group.Client{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ListGroupsResponse)
}

// commitOn makes group id, with an offset committed by c.
func commitOn(t *testing.T, c *coordinator.Coordinator, id string) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, id, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Handle(ctx, group.Client{}, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit of %s: error %d", id, code)
	}
}

// coordinator is a node's coordinator serving the partitions owned says,
// loaded from the shared store.
func (m *movingCluster) coordinator(t *testing.T, owned func(int32) bool) *coordinator.Coordinator {
	t.Helper()
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	c, err := coordinator.New(coordinator.Config{Partitions: movingParts, Group: gcfg, Store: m.st,
		Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000)), Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// page is the groups page at query, which must answer 200.
func (m *movingCluster) page(t *testing.T, query string) string {
	t.Helper()
	w := serveURL(m.con, "/console/"+query, "", "")
	if w.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", query, w.Code, w.Body.String())
	}
	return w.Body.String()
}

var countLine = regexp.MustCompile(`<p class="count[^"]*" id="count">([^<]*)`)

// countOf is the text of the page's count line, up to its first tag.
func countOf(body string) string {
	if m := countLine.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// TestGroupsPageCountsAMovingPartitionOnce: while a coordinator partition
// moves, the old owner may answer the console's ListGroups before it lets
// the partition go and the new owner after it has loaded it, so both count
// the partition's groups, those they do not send included (beyond the
// page's limit, or not matching the search). The page counts each
// partition once, from the nodes' counts per partition. Before, the page
// added the nodes' totals and took off only the groups both sent: with 3
// rows shown of 40 groups it said "the first 3 of 52 matching groups (52
// groups)" when 12 groups moved.
func TestGroupsPageCountsAMovingPartitionOnce(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 3
	m := newMovingCluster(t, 40)
	m.byBroker[0] = m.coordinator(t, func(int32) bool { return true })            // the old owner, still serving it
	m.byBroker[1] = m.coordinator(t, func(p int32) bool { return p == m.moving }) // the new owner, loaded
	t.Logf("partition %d, of %d groups, is served by both nodes", m.moving, m.inMoving)
	for _, tc := range []struct{ query, count string }{
		{"", "the first 3 of 40 matching groups (40 groups)"},
		{"?q=app-1", "the first 3 of 10 matching groups (40 groups)"},
		{"?q=app-3&match=prefix", "the first 3 of 10 matching groups (40 groups)"},
		{"?q=app-39", "1 of 40 groups match"},
		{"?q=app&sort=state", "the first 3 of 40 matching groups (40 groups)"},
	} {
		body := m.page(t, tc.query)
		if got := countOf(body); got == "" || !strings.HasPrefix(got, tc.count) {
			t.Errorf("%q: the page says %q, want %q", tc.query, got, tc.count+" …")
		}
		if strings.Contains(body, `id="uncounted"`) {
			t.Errorf("%q: every partition was counted, and the page says some were not", tc.query)
		}
	}
}

// TestGroupsPageSaysWhichPartitionsWereNotCounted: the other moment of a
// move, the old owner answering after it let the partition go and the new
// one before it took it over: no node counts the partition's groups, and
// no answer can tell how many there are. The page counts the others and
// says which partition it could not count, why, and how to get the exact
// figure. Before, it said "the first 3 of 30 matching groups (30 groups)"
// (the 10 groups of partition 0 missing) and nothing else.
func TestGroupsPageSaysWhichPartitionsWereNotCounted(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 3
	m := newMovingCluster(t, 40)
	m.byBroker[0] = m.coordinator(t, func(p int32) bool { return p != m.moving }) // let it go
	m.byBroker[1] = m.coordinator(t, func(int32) bool { return false })           // not taken over yet
	body := m.page(t, "")
	want := fmt.Sprintf("the first 3 of %d matching groups (%d groups)", 40-m.inMoving, 40-m.inMoving)
	if got := countOf(body); got == "" || !strings.HasPrefix(got, want) {
		t.Errorf("the page says %q, want %q", got, want+" …")
	}
	note := regexp.MustCompile(`<p class="error uncounted" id="uncounted">[^<]*`).FindString(body)
	for _, w := range []string{
		fmt.Sprintf("coordinator partition %d (of 4) are neither counted nor listed", m.moving),
		"moving between nodes", "Reload the page once the move is over",
	} {
		if !strings.Contains(note, w) {
			t.Errorf("the note on uncounted groups %q lacks %q", note, w)
		}
	}
	// Taken over: counted again, and the note gone.
	m.byBroker[1] = m.coordinator(t, func(p int32) bool { return p == m.moving })
	body = m.page(t, "")
	if got := countOf(body); got == "" || !strings.HasPrefix(got, "the first 3 of 40 matching groups (40 groups)") {
		t.Errorf("after the move the page says %q, want 40 groups", got)
	}
	if strings.Contains(body, `id="uncounted"`) {
		t.Error("after the move the page still says groups were not counted")
	}
}

// TestGroupListKeepsOnePartitionCount: a partition both nodes counted is
// counted once whichever node answers first, with the larger of the two
// counts (here the new owner's, which has a group created after the old
// owner answered); an answer without counts per partition (a node before
// them) leaves the console adding the nodes' totals, as before, and naming
// no partition as uncounted.
func TestGroupListKeepsOnePartitionCount(t *testing.T) {
	m := newMovingCluster(t, 40)
	old := m.coordinator(t, func(int32) bool { return true })
	f := group.ListFilter{ID: "app", Limit: 3}
	list := func(c *coordinator.Coordinator) *kmsg.ListGroupsResponse { return listOn(t, c, f) }
	fromOld := list(old)
	// The new owner, loaded, takes a group the old owner did not see.
	nw := m.coordinator(t, func(p int32) bool { return p == m.moving })
	extra := m.newInMoving()
	commitOn(t, nw, extra)
	fromNew := list(nw)
	for _, order := range [][]*kmsg.ListGroupsResponse{{fromOld, fromNew}, {fromNew, fromOld}} {
		l := newGroupList(f)
		for i, a := range order {
			l.add(int32(i), a)
		}
		l.done()
		if l.Listed != 41 || l.Matching != 41 || len(l.Uncounted) != 0 {
			t.Errorf("old node first %v: %d of %d, uncounted %v; want 41 of 41, none uncounted", order[0] == fromOld, l.Matching, l.Listed, l.Uncounted)
		}
	}
	// The old node without counts per partition: totals, as before.
	l := newGroupList(f)
	l.add(0, withoutPartitionCounts(fromOld))
	l.add(1, fromNew)
	l.done()
	// The totals, less the groups both sent (add).
	want := 40 + m.inMoving + 1
	for _, a := range fromOld.Groups {
		for _, b := range fromNew.Groups {
			if a.Group == b.Group {
				want--
			}
		}
	}
	if l.Listed != want || len(l.Uncounted) != 0 {
		t.Errorf("with an older node: %d listed, uncounted %v; want the totals %d, none uncounted", l.Listed, l.Uncounted, want)
	}
}

// TestGroupsPageTakesTheOwnersCount: while a partition moves, the old
// owner, which loaded it before the move, still counts a group that was
// deleted on the new owner since. Of the two counts the page kept the
// larger, the old owner's stale one; it now keeps the count of the node
// that owns the partition now, as the console's node sees the cluster, and
// lists the partition's groups as that node sent them.
func TestGroupsPageTakesTheOwnersCount(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 3
	m := newMovingCluster(t, 40)
	m.byBroker[0] = m.coordinator(t, func(int32) bool { return true })            // the old owner, loaded before
	m.byBroker[1] = m.coordinator(t, func(p int32) bool { return p == m.moving }) // the new owner
	gone := m.firstInMoving()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{gone}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := m.byBroker[1].Handle(ctx, group.Client{}, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != 0 {
		t.Fatalf("deleting %s on the new owner: error %d", gone, code)
	}
	m.ownedBy(t)
	for _, tc := range []struct{ query, count string }{
		{"", "the first 3 of 39 matching groups (39 groups)"},
		{"?q=app", "the first 3 of 39 matching groups (39 groups)"},
	} {
		body := m.page(t, tc.query)
		if got := countOf(body); got == "" || !strings.HasPrefix(got, tc.count) {
			t.Errorf("%q: the page says %q, want %q (the owner's count of partition %d, without %s)", tc.query, got, tc.count+" …", m.moving, gone)
		}
		if strings.Contains(body, ">"+gone+"<") {
			t.Errorf("%q: the page lists %s, which only the old owner still had", tc.query, gone)
		}
	}
}

// TestGroupsPageAsksTheOwnerAgain: the old owner answered after it let the
// partition go and the new owner before it took over, so no node counted
// the partition. The page named it as not counted; it now asks the node
// that owns it (as the console's node sees the cluster) once more, and
// counts and lists it from that answer when the move is over by then.
func TestGroupsPageAsksTheOwnerAgain(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 50
	m := newMovingCluster(t, 40)
	m.ownedBy(t)
	m.byBroker[0] = m.coordinator(t, func(p int32) bool { return p != m.moving }) // let it go
	m.byBroker[1] = m.coordinator(t, func(int32) bool { return false })           // not taken over yet
	m.next[1] = m.coordinator(t, func(p int32) bool { return p == m.moving })     // taken over after its first answer
	body := m.page(t, "")
	if got := countOf(body); got == "" || !strings.HasPrefix(got, "40 of 40 groups") {
		t.Errorf("the page says %q, want %q", got, "40 of 40 groups …")
	}
	if strings.Contains(body, `id="uncounted"`) {
		t.Error("the owner counted the partition when asked again, and the page says it was not counted")
	}
	for _, id := range m.ids {
		if !strings.Contains(body, ">"+id+"<") {
			t.Errorf("group %s is not listed", id)
		}
	}
	// Still not taken over when asked again: named, as before.
	m.byBroker[1] = m.coordinator(t, func(int32) bool { return false })
	body = m.page(t, "")
	if !strings.Contains(body, `id="uncounted"`) {
		t.Errorf("the owner still does not count partition %d, and the page does not say so", m.moving)
	}
}

// TestGroupsPageAsksTheOwnerForItsCount: the old owner answered before it
// let the partition go and the new owner before it took over, so only the
// old owner counted the partition, and its count is stale: a group was
// created on the new owner since. The page took that count, the only one,
// though the node that owns the partition now (as the console's node sees
// the cluster) is another; it now asks the owner once more, as for a
// partition no node counted, and takes its count and rows. An owner that
// still does not count the partition leaves the old owner's count.
func TestGroupsPageAsksTheOwnerForItsCount(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 50
	m := newMovingCluster(t, 40)
	m.ownedBy(t)
	m.byBroker[0] = m.coordinator(t, func(int32) bool { return true })  // the old owner, loaded before
	m.byBroker[1] = m.coordinator(t, func(int32) bool { return false }) // not taken over yet
	owner := m.coordinator(t, func(p int32) bool { return p == m.moving })
	extra := m.newInMoving()
	commitOn(t, owner, extra)
	m.next[1] = owner // taken over after its first answer
	body := m.page(t, "")
	if got := countOf(body); !strings.HasPrefix(got, "41 of 41 groups") || !strings.Contains(body, ">"+extra+"<") {
		t.Errorf("the page says %q and lists %s: %v; want 41 of 41 groups, %s listed (the owner's count of partition %d, asked again)",
			got, extra, strings.Contains(body, ">"+extra+"<"), extra, m.moving)
	}
	if strings.Contains(body, `id="uncounted"`) {
		t.Error("every partition was counted, and the page says some were not")
	}
	// The owner still does not count it when asked again: the old
	// owner's count, the only one, stays.
	m.byBroker[1] = m.coordinator(t, func(int32) bool { return false })
	body = m.page(t, "")
	if got := countOf(body); !strings.HasPrefix(got, "40 of 40 groups") || strings.Contains(body, `id="uncounted"`) {
		t.Errorf("the owner does not count partition %d: the page says %q (a note on uncounted groups: %v), want the old owner's 40 groups and no note",
			m.moving, got, strings.Contains(body, `id="uncounted"`))
	}
}

// TestPartitionOwners: the owners the groups page goes by are those of the
// console's node's cluster view, and none when there is no view (a single
// node) or when that node has no lease: its view is then no longer
// followed, and may name as owner a node that let the partition go.
func TestPartitionOwners(t *testing.T) {
	view := &ClusterView{Self: 0, Partitions: 3, Nodes: []ClusterNode{{ID: 0, Owned: []int32{0, 2}}, {ID: 1, Owned: []int32{1}}}}
	noLease := *view
	noLease.NoLease = true
	for _, tc := range []struct {
		name    string
		cluster func() *ClusterView
		want    map[int32]int32
	}{
		{"single node", nil, nil},
		{"no view", func() *ClusterView { return nil }, nil},
		{"no lease", func() *ClusterView { return &noLease }, nil},
		{"serving", func() *ClusterView { return view }, map[int32]int32{0: 0, 1: 1, 2: 0}},
	} {
		c := New(&proxyNode{}, tc.cluster, slog.New(slog.NewTextHandler(testlog.Writer(t), nil)))
		got := c.partitionOwners()
		if (got == nil) != (tc.want == nil) || !maps.Equal(got, tc.want) {
			t.Errorf("%s: owners %v, want %v", tc.name, ownersText(got), ownersText(tc.want))
		}
	}
}

// TestGroupsPageWithoutLeaseIgnoresTheView: the console's node has no
// lease, and its last view of the cluster names the old owner of a moving
// partition, which loaded it before a group was created on the new owner.
// The page does not go by that view: of the two counts it keeps the
// larger, the new owner's, and lists the new group, as with no view at all.
// Going by the stale view, it would count the old owner's 40 groups and
// leave the new one out.
func TestGroupsPageWithoutLeaseIgnoresTheView(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 50
	m := newMovingCluster(t, 40)
	m.byBroker[0] = m.coordinator(t, func(int32) bool { return true })            // the old owner, loaded before
	m.byBroker[1] = m.coordinator(t, func(p int32) bool { return p == m.moving }) // the new owner
	extra := m.newInMoving()
	commitOn(t, m.byBroker[1], extra)
	for _, noLease := range []bool{true, false} {
		m.viewed(t, 0, noLease)
		body := m.page(t, "")
		got := countOf(body)
		if noLease {
			if !strings.HasPrefix(got, "41 of 41 groups") || !strings.Contains(body, ">"+extra+"<") {
				t.Errorf("without a lease: the page says %q and lists %s: %v; want 41 groups, %s listed (the larger count, not the stale view's owner's)",
					got, extra, strings.Contains(body, ">"+extra+"<"), extra)
			}
			continue
		}
		// With the lease the view is followed, stale or not: the
		// check above can tell the two apart.
		if !strings.HasPrefix(got, "40 of 40 groups") {
			t.Errorf("with a lease: the page says %q, want the count of the owner the view names (40)", got)
		}
	}
}

// TestGroupsPageMixedVersionsWithOwners: a node from before the counts per
// partition (an older cohort, during a rolling upgrade) leaves the page
// adding up the nodes' totals, as before the counts, also when the
// console's node knows who owns each partition: while a partition moves,
// a group both nodes send is counted once, and a partition neither counts
// is not noticed, and not asked for again (no node is asked twice).
func TestGroupsPageMixedVersionsWithOwners(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 50
	for _, olderBroker := range []int{0, 1} {
		// Both count the moving partition; the owner (1) has a group
		// the old owner (0) did not see.
		m := newMovingCluster(t, 40)
		m.ownedBy(t)
		m.older[olderBroker] = true
		m.byBroker[0] = m.coordinator(t, func(int32) bool { return true })
		m.byBroker[1] = m.coordinator(t, func(p int32) bool { return p == m.moving })
		extra := m.newInMoving()
		commitOn(t, m.byBroker[1], extra)
		body := m.page(t, "")
		if got := countOf(body); !strings.HasPrefix(got, "41 of 41 groups") || !strings.Contains(body, ">"+extra+"<") {
			t.Errorf("broker %d older, both count: the page says %q and lists %s: %v; want 41 of 41 groups (each group sent by both once), %s listed",
				olderBroker, got, extra, strings.Contains(body, ">"+extra+"<"), extra)
		}
		if strings.Contains(body, `id="uncounted"`) {
			t.Errorf("broker %d older, both count: the page names uncounted partitions", olderBroker)
		}
		if a, b := m.asked[0].Load(), m.asked[1].Load(); a != 1 || b != 1 {
			t.Errorf("broker %d older, both count: ListGroups asked %d and %d times, want once each", olderBroker, a, b)
		}

		// Neither counts it; the owner would if asked again.
		m = newMovingCluster(t, 40)
		m.ownedBy(t)
		m.older[olderBroker] = true
		m.byBroker[0] = m.coordinator(t, func(p int32) bool { return p != m.moving })
		m.byBroker[1] = m.coordinator(t, func(int32) bool { return false })
		m.next[1] = m.coordinator(t, func(p int32) bool { return p == m.moving })
		body = m.page(t, "")
		want := fmt.Sprintf("%d of %d groups", 40-m.inMoving, 40-m.inMoving)
		if got := countOf(body); !strings.HasPrefix(got, want) || strings.Contains(body, `id="uncounted"`) {
			t.Errorf("broker %d older, neither counts: the page says %q (a note on uncounted groups: %v), want %q and no note, as before",
				olderBroker, got, strings.Contains(body, `id="uncounted"`), want)
		}
		if a, b := m.asked[0].Load(), m.asked[1].Load(); a != 1 || b != 1 {
			t.Errorf("broker %d older, neither counts: ListGroups asked %d and %d times, want once each", olderBroker, a, b)
		}
	}
}

// withoutPartitionCounts is resp as a node from before the counts per
// partition sends it: its summary holds the totals only.
func withoutPartitionCounts(resp *kmsg.ListGroupsResponse) *kmsg.ListGroupsResponse {
	sum, ok := group.ListSummaryOf(resp)
	if !ok {
		return resp
	}
	bare := *resp
	bare.UnknownTags = kmsg.Tags{}
	bare.UnknownTags.Set(group.ListFilterTag, tagValue(sum.Listed, sum.Matching, sum.ProtocolTypes...))
	return &bare
}

// ownersText is owners as the errors of TestPartitionOwners show them.
func ownersText(owners map[int32]int32) string {
	if owners == nil {
		return "none (nil)"
	}
	return fmt.Sprint(owners)
}

// TestGroupListTakesTheOwnersRow: while its partition moves, a group is
// sent by both nodes, the old owner's row stale (here a classic group with
// offsets only, which a consumer-protocol member has since made a
// consumer group on the new owner). The list shows the row of the node
// that owns the partition as the console's node sees the cluster,
// whichever node answered first; before, it showed the first row
// received. The row's type matters beyond the column: it decides how the
// page describes the group. An owner's row that does not pass the filter
// (what a node sends is filtered again) takes the stale row off the list.
func TestGroupListTakesTheOwnersRow(t *testing.T) {
	m := newMovingCluster(t, 40)
	old := m.coordinator(t, func(int32) bool { return true })
	nw := m.coordinator(t, func(p int32) bool { return p == m.moving })
	all, classic := group.ListFilter{ID: "app", Limit: 50}, group.ListFilter{Type: "classic", Limit: 50}
	fromOld, classicFromOld := listOn(t, old, all), listOn(t, old, classic) // before the heartbeat below
	moved := m.firstInMoving()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = moved, "member-1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := nw.Handle(ctx, group.Client{}, hb)
	if err != nil || resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode != 0 {
		t.Fatalf("heartbeat into %s on the new owner: %v %+v", moved, err, resp)
	}
	fromNew, classicFromNew := listOn(t, nw, all), listOn(t, nw, classic)
	// An owner that sends the group though it does not pass the filter.
	row := slices.IndexFunc(fromNew.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return g.Group == moved })
	if row < 0 {
		t.Fatalf("the new owner does not list %s", moved)
	}
	classicFromNew.Groups = append(classicFromNew.Groups, fromNew.Groups[row])
	owners := map[int32]int32{}
	for p := range int32(movingParts) {
		owners[p] = 0
	}
	owners[m.moving] = 1
	for _, tc := range []struct {
		f                group.ListFilter
		fromOld, fromNew *kmsg.ListGroupsResponse
		rows             int
		wantType         string // "": not listed
	}{
		{all, fromOld, fromNew, 40, "consumer"},
		{classic, classicFromOld, classicFromNew, 39, ""},
	} {
		for _, oldFirst := range []bool{true, false} {
			l := newGroupList(tc.f)
			l.owners = owners
			if oldFirst {
				l.add(0, tc.fromOld)
				l.add(1, tc.fromNew)
			} else {
				l.add(1, tc.fromNew)
				l.add(0, tc.fromOld)
			}
			l.done()
			i := slices.IndexFunc(l.Rows, func(r GroupRow) bool { return r.ID == moved })
			switch {
			case tc.wantType == "" && i >= 0:
				t.Errorf("%+v, old owner first %v: %s is listed as %s %s, the old owner's row; the owner's does not pass the filter",
					tc.f, oldFirst, moved, l.Rows[i].Type, l.Rows[i].State)
			case tc.wantType != "" && i < 0:
				t.Errorf("%+v, old owner first %v: %s is not listed", tc.f, oldFirst, moved)
			case tc.wantType != "" && l.Rows[i].Type != tc.wantType:
				t.Errorf("%+v, old owner first %v: the row of %s is %s %s, the old owner's; want the owner's (%s)",
					tc.f, oldFirst, moved, l.Rows[i].Type, l.Rows[i].State, tc.wantType)
			}
			if len(l.Rows) != tc.rows {
				t.Errorf("%+v, old owner first %v: %d rows, want %d", tc.f, oldFirst, len(l.Rows), tc.rows)
			}
		}
	}
}
