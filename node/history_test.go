package node

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// TestHistorySurvivesRestart: a group's rebalance history, asked for with
// DescribeGroups tag 10001, is the same after the node restarts on its disk
// store, and the next rebalance continues its numbering.
func TestHistorySurvivesRestart(t *testing.T) {
	clk, start := restartable(t, 6)
	n := start("127.0.0.1:0")
	addr := n.Addr()
	hc := newHistoryClient(t, addr)
	m := hc.rebalance("")
	clk.Advance(time.Second)
	hc.rebalance(m) // the leader's rejoin: a second event
	before := hc.history(2)
	if len(before.History) != 2 || before.History[0].Cause.Kind != group.CauseMemberJoined || before.History[1].Cause.Kind != group.CauseMetadataChanged {
		t.Fatalf("before restart: %+v", before.History)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start(addr)
	defer n.Close()
	after := hc.history(2)
	a, _ := json.Marshal(before.History)
	b, _ := json.Marshal(after.History)
	if string(a) != string(b) {
		t.Fatalf("history differs after restart:\nbefore %s\nafter  %s", a, b)
	}
	hc.rebalance(m)
	if h := hc.history(3).History; len(h) != 3 || h[2].Seq != 3 || h[2].Cause.Kind != group.CauseLoaded {
		t.Fatalf("after restart and a rebalance: %+v", h)
	}
}

// TestRejoinLinkSurvivesRestart: a member evicted for its session before
// the node restarts, whose client joins again with a new member id after
// the restart, is linked to that eviction (cause.rejoin), as without the
// restart: the evictions are rebuilt from the stored history.
func TestRejoinLinkSurvivesRestart(t *testing.T) {
	clk, start := restartable(t, 7)
	n := start("127.0.0.1:0")
	addr := n.Addr()
	hc := newHistoryClient(t, addr)
	old := hc.rebalance("")
	clk.Advance(11 * time.Second) // the 10 s session runs out: the group is Empty
	if h := hc.history(2).History; h[1].Cause.Kind != group.CauseSessionTimeout || h[1].Cause.MemberID != old {
		t.Fatalf("the eviction: %+v", h[1])
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start(addr)
	defer n.Close()
	clk.Advance(4 * time.Second)
	// The restarted node draws the same member ids as before (a seeded
	// source): another group takes the one the evicted member had.
	hc.group = "other"
	hc.rebalance("")
	hc.group = "h"
	hc.rebalance("")
	c := hc.history(3).History[2].Cause
	if c.Kind != group.CauseMemberJoined || c.Rejoin == nil || c.Rejoin.MemberID != old || c.Rejoin.By != "client" ||
		c.Rejoin.Kind != group.CauseSessionTimeout {
		t.Fatalf("the join after the restart: %+v (rejoin %+v)", c, c.Rejoin)
	}
}

// historyClient joins one-member classic groups ("h" by default) and
// reads the history of "h", through a node that may restart on the same address.
type historyClient struct {
	t     *testing.T
	ctx   context.Context
	cl    *kgo.Client
	group string // "h" unless set
}

func newHistoryClient(t *testing.T, addr string) *historyClient {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &historyClient{t: t, ctx: ctx, cl: cl, group: "h"}
}

func (hc *historyClient) do(req kmsg.Request) kmsg.Response {
	hc.t.Helper()
	return answered(hc.t, hc.ctx, hc.cl, req)
}

// rebalance joins member ("": a new one) to hc.group and syncs it alone; it returns
// its member id.
func (hc *historyClient) rebalance(member string) string {
	t := hc.t
	t.Helper()
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.MemberID, j.ProtocolType = hc.group, member, "consumer"
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
	j.Version = 3
	jr := hc.do(&pinned{j, 3}).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("join %d", jr.ErrorCode)
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = hc.group, jr.MemberID, jr.Generation
	s.ProtocolType, s.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
	if sr := hc.do(s).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("sync %d", sr.ErrorCode)
	}
	return jr.MemberID
}

// history waits (bounded) until the group's history holds at least want
// events, and returns it.
func (hc *historyClient) history(want int) *group.HistoryDoc {
	t := hc.t
	t.Helper()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"h"}
	d.Version = 5
	group.RequestHistory(d, -1)
	var doc *group.HistoryDoc
	testwait.For(t, 5*time.Second, "the history", func() bool { // the event is written after the sync answer
		r := hc.do(&pinned{d, 5}).(*kmsg.DescribeGroupsResponse)
		got, ok := group.HistoryTagOf(&r.Groups[0])
		if ok && len(got.History) >= want {
			doc = got
		}
		return doc != nil
	})
	return doc
}
