package console

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/node"
	"github.com/cohort-dev/cohort/server"
)

// proxyNode is a Kafka server at addr (a node in another process, or
// kfake) seen by the console as its own node without authentication:
// every connection the console opens to it is relayed over TCP, and its
// bytes, both ways, are counted in wire.
type proxyNode struct {
	addr string
	wire atomic.Int64
}

func (n *proxyNode) ConsoleListener() (string, bool, error) { return "PLAINTEXT", false, nil }
func (n *proxyNode) ConsolePeerTLS() *tls.Config            { return nil }
func (n *proxyNode) SelfAddrs() []string                    { return []string{n.addr} }
func (n *proxyNode) FailedAuthDelay() time.Duration         { return 0 }
func (n *proxyNode) ConsoleMechanisms() []string            { return nil }
func (n *proxyNode) ConsoleCredentials(string) []string     { return nil }

func (n *proxyNode) ServeInternal(nc net.Conn) error {
	tc, err := net.Dial("tcp", n.addr)
	if err != nil {
		return err
	}
	pump := func(dst, src net.Conn) {
		buf := make([]byte, 64<<10)
		for {
			k, err := src.Read(buf)
			n.wire.Add(int64(k))
			if k > 0 {
				if _, werr := dst.Write(buf[:k]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}
	go pump(tc, nc)
	go pump(nc, tc)
	return nil
}

// TestGroupsSearchAsksTheNode: the groups page sends its search and filters
// to the node (group.ListFilterTag), which answers only the matching groups
// (in the default order, only the first maxGroupRows), with the counts the
// page shows. Before, every page asked for every group the viewer may
// describe and kept a few: a search matching 12 groups of 100,000 received
// all 100,000 (docs/benchmarks.md).
func TestGroupsSearchAsksTheNode(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 3
	var mu sync.Mutex
	var answered []int // groups in each ListGroups answer
	n := startNode(t, false, func(c *node.Config) {
		c.Tap = func(_ server.Client, _ kmsg.Request, resp kmsg.Response) {
			if lr, ok := resp.(*kmsg.ListGroupsResponse); ok {
				mu.Lock()
				answered = append(answered, len(lr.Groups))
				mu.Unlock()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, n, false))
	for _, g := range []string{"team-needle-b", "grp-1", "team-needle-a", "grp-2", "grp-3", "grp-4", "Needle-up"} {
		commit(ctx, t, adm, g, "t", 1)
	}
	base := "http://" + n.HTTPAddr() + "/console/"
	for _, tc := range []struct {
		query, count string
		shown        string
		answered     int // groups the node sent
	}{
		{"?q=needle", "2 of 7 groups match", "team-needle-a team-needle-b", 2},
		{"?q=team-&match=prefix", "2 of 7 groups match", "team-needle-a team-needle-b", 2},
		{"?q=Needle", "1 of 7 groups match", "Needle-up", 1},
		{"?q=nothing", "0 of 7 groups match", "", 0},
		// The default order: the node sends the first maxGroupRows.
		{"", "the first 3 of 7 matching groups (7 groups)", "Needle-up grp-1 grp-2", 3},
		{"?q=grp", "the first 3 of 4 matching groups (7 groups)", "grp-1 grp-2 grp-3", 3},
		// Another order needs every matching group.
		{"?q=grp&desc=1", "the first 3 of 4 matching groups (7 groups)", "grp-4 grp-3 grp-2", 4},
		{"?q=grp&sort=members", "the first 3 of 4 matching groups (7 groups)", "grp-1 grp-2 grp-3", 4},
		{"?q=grp&state=empty&type=CLASSIC&sort=state", "the first 3 of 4 matching groups (7 groups)", "grp-1 grp-2 grp-3", 4},
		{"?q=grp&state=Stable", "0 of 7 groups match", "", 0},
	} {
		mu.Lock()
		answered = nil
		mu.Unlock()
		code, body := get(t, base+tc.query, "", "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.query, code, body)
		}
		if !strings.Contains(body, tc.count) {
			t.Errorf("%s: the page does not say %q", tc.query, tc.count)
		}
		if got := strings.Join(shownGroups(body), " "); got != tc.shown {
			t.Errorf("%s: shows %q, want %q", tc.query, got, tc.shown)
		}
		mu.Lock()
		if fmt.Sprint(answered) != fmt.Sprint([]int{tc.answered}) {
			t.Errorf("%s: ListGroups answered %v groups, want [%d]", tc.query, answered, tc.answered)
		}
		mu.Unlock()
	}
}

// TestGroupsSearchWithoutTheTag: against a node that ignores
// group.ListFilterTag (kfake, as Kafka or an older cohort node), which
// answers every group, the console filters and counts them itself: the
// page is the same.
func TestGroupsSearchWithoutTheTag(t *testing.T) {
	defer func(rows int) { maxGroupRows = rows }(maxGroupRows)
	maxGroupRows = 3
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var asked []bool // whether each ListGroups kfake got carried the filter
	c.ControlKey(kmsg.ListGroups.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		_, filtered := group.ListFilterRequested(req.(*kmsg.ListGroupsRequest))
		mu.Lock()
		asked = append(asked, filtered)
		mu.Unlock()
		return nil, nil, false // kfake answers, ignoring the tag
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, g := range []string{"team-needle-b", "grp-1", "team-needle-a", "grp-2", "grp-3", "grp-4", "Needle-up"} {
		commit(ctx, t, adm, g, "t", 1)
	}
	con := New(&proxyNode{addr: c.ListenAddrs()[0]}, nil, slog.New(slog.NewTextHandler(testlog.Writer(t), nil)))
	for _, tc := range []struct{ query, count, shown string }{
		{"?q=needle", "2 of 7 groups match", "team-needle-a team-needle-b"},
		{"?q=team-&match=prefix", "2 of 7 groups match", "team-needle-a team-needle-b"},
		{"?q=Needle", "1 of 7 groups match", "Needle-up"},
		{"", "the first 3 of 7 matching groups (7 groups)", "Needle-up grp-1 grp-2"},
		{"?q=grp&desc=1", "the first 3 of 4 matching groups (7 groups)", "grp-4 grp-3 grp-2"},
	} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		w := serveURL(con, "/console/"+tc.query, "", "")
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.query, w.Code, body)
		}
		if !strings.Contains(body, tc.count) {
			t.Errorf("%s: the page does not say %q", tc.query, tc.count)
		}
		if got := strings.Join(shownGroups(body), " "); got != tc.shown {
			t.Errorf("%s: shows %q, want %q", tc.query, got, tc.shown)
		}
		mu.Lock()
		if fmt.Sprint(asked) != "[true]" {
			t.Errorf("%s: kfake was asked ListGroups %v (with the filter), want [true]", tc.query, asked)
		}
		mu.Unlock()
	}
}

// TestGroupListMixedNodes: in a cluster of nodes some of which know
// group.ListFilterTag and some not (a rolling upgrade), the console adds up
// the counts of the first and counts and filters the groups of the others;
// the rows of every node are filtered again, whatever a node sent.
func TestGroupListMixedNodes(t *testing.T) {
	f := group.ListFilter{ID: "app", Limit: 2}
	l := newGroupList(f)
	// A node with the tag: 10 groups it may describe, 4 match, the first 2
	// sent (and one that does not match, which is dropped).
	newer := kmsg.NewPtrListGroupsResponse()
	newer.Version = 5
	for _, id := range []string{"app-1", "app-2", "bogus"} {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.GroupState, g.ProtocolType = id, "Empty", "consumer"
		newer.Groups = append(newer.Groups, g)
	}
	newer.UnknownTags.Set(group.ListFilterTag, tagValue(10, 4, "consumer", "connect"))
	// A node without it: every group.
	older := kmsg.NewPtrListGroupsResponse()
	for _, id := range []string{"app-0", "zz", "my-app", "other"} {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.GroupState, g.ProtocolType = id, "Stable", "sidecar"
		older.Groups = append(older.Groups, g)
	}
	l.add(0, newer)
	l.add(1, older)
	var ids []string
	for _, r := range l.Rows {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "app-1 app-2 app-0 my-app" {
		t.Errorf("rows %q, want app-1 app-2 app-0 my-app", got)
	}
	if l.Listed != 14 || l.Matching != 6 {
		t.Errorf("%d listed, %d matching, want 14 and 6", l.Listed, l.Matching)
	}
	if got := strings.Join(protocolTypesOf(l), " "); got != "connect consumer sidecar" {
		t.Errorf("protocol types %q, want connect consumer sidecar", got)
	}
}

// protocolTypesOf is the protocol types the form is offered, in order.
func protocolTypesOf(l *groupList) []string { return l.ProtocolTypes }

// answer is a node's ListGroups answer: groups of these ids (state Empty,
// protocol type "consumer"), and the summary of a node that filtered
// unless sum is nil.
func answer(sum *group.ListSummary, ids ...string) *kmsg.ListGroupsResponse {
	resp := kmsg.NewPtrListGroupsResponse()
	resp.Version = 5
	for _, id := range ids {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.GroupState, g.ProtocolType = id, "Empty", "consumer"
		resp.Groups = append(resp.Groups, g)
	}
	if sum != nil {
		resp.UnknownTags.Set(group.ListFilterTag, tagValue(sum.Listed, sum.Matching, sum.ProtocolTypes...))
	}
	return resp
}

// TestGroupListProtocolTypesOrderless: with more protocol types than the
// form offers among the nodes, it offers the first maxProtocolTypes of
// their union, sorted, whichever node answers first; so does a node that
// does not filter and sends them in no order.
func TestGroupListProtocolTypesOrderless(t *testing.T) {
	names := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("p%03d", i))
		}
		return out
	}
	want := strings.Join(names(0, maxProtocolTypes), " ")
	// Each node's summary holds its first 100, sorted.
	hi := &group.ListSummary{Listed: 150, Matching: 0, ProtocolTypes: names(50, 150)}
	lo := &group.ListSummary{Listed: 150, Matching: 0, ProtocolTypes: names(0, 100)}
	for _, order := range [][]*group.ListSummary{{hi, lo}, {lo, hi}} {
		l := newGroupList(group.ListFilter{ID: "x", Limit: 1000})
		for _, s := range order {
			l.add(0, answer(s))
		}
		if got := strings.Join(protocolTypesOf(l), " "); got != want {
			t.Errorf("nodes answering %v first: the form offers %q, want %q", order[0].ProtocolTypes[:1], got, want)
		}
	}
	// A node without the tag: 150 groups of 150 protocol types, the
	// largest first.
	old := kmsg.NewPtrListGroupsResponse()
	for i := 149; i >= 0; i-- {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType = fmt.Sprintf("g%03d", i), fmt.Sprintf("p%03d", i)
		old.Groups = append(old.Groups, g)
	}
	l := newGroupList(group.ListFilter{ID: "x", Limit: 1000})
	l.add(1, old)
	if got := strings.Join(protocolTypesOf(l), " "); got != want {
		t.Errorf("a node without the tag: the form offers %q, want %q", got, want)
	}
}

// TestGroupListCountsAMovingGroupOnce: a group two nodes list while its
// partition moves is one row, and counted once in "N of M" where both
// nodes counted it.
func TestGroupListCountsAMovingGroupOnce(t *testing.T) {
	f := group.ListFilter{ID: "app", Limit: 1000}
	for _, tc := range []struct {
		name             string
		first, second    *kmsg.ListGroupsResponse
		listed, matching int
	}{
		{"both filter", // app-3 moves: each node counts it
			answer(&group.ListSummary{Listed: 10, Matching: 3}, "app-1", "app-2", "app-3"),
			answer(&group.ListSummary{Listed: 5, Matching: 2}, "app-3", "app-4"),
			14, 4},
		{"the first does not filter", // it sends zz too, which does not match: counted here
			answer(nil, "app-3", "zz", "app-5"),
			answer(&group.ListSummary{Listed: 5, Matching: 2}, "app-3", "app-4"),
			7, 3},
		{"the second does not filter", // its app-3 is skipped, not counted
			answer(&group.ListSummary{Listed: 5, Matching: 2}, "app-3", "app-4"),
			answer(nil, "app-3", "zz", "app-5"),
			7, 3},
		{"a node sends a group twice", // it counted it once: nothing to take off
			answer(&group.ListSummary{Listed: 5, Matching: 2}, "app-3", "app-4", "app-3"),
			answer(&group.ListSummary{Listed: 4, Matching: 1}, "app-5"),
			9, 3},
		{"a node counts less than it sends", // the counts are at least what was received
			answer(&group.ListSummary{Listed: 0, Matching: 0}, "app-3", "app-4"),
			answer(&group.ListSummary{Listed: 1, Matching: 1}, "app-3"),
			2, 2},
	} {
		l := newGroupList(f)
		l.add(0, tc.first)
		l.add(1, tc.second)
		if len(l.Rows) != tc.matching {
			t.Errorf("%s: %d rows, want %d", tc.name, len(l.Rows), tc.matching)
		}
		if l.Listed != tc.listed || l.Matching != tc.matching {
			t.Errorf("%s: %d of %d groups match, want %d of %d", tc.name, l.Matching, l.Listed, tc.matching, tc.listed)
		}
	}
}

// tagValue is a ListFilterTag answer value, as a node writes it.
func tagValue(listed, matching int32, ptypes ...string) []byte {
	resp := kmsg.NewPtrListGroupsResponse()
	for range listed {
		g := kmsg.NewListGroupsResponseGroup()
		resp.Groups = append(resp.Groups, g)
	}
	for i, p := range ptypes {
		resp.Groups[i].ProtocolType = p
	}
	for i := range matching {
		resp.Groups[i].Group = "x"
	}
	group.FilterList(resp, group.ListFilter{ID: "x", Limit: -1})
	var v []byte
	resp.UnknownTags.Each(func(k uint32, b []byte) {
		if k == group.ListFilterTag {
			v = b
		}
	})
	return v
}
