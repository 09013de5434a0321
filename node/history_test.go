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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	do := func(req kmsg.Request) kmsg.Response { t.Helper(); return answered(t, ctx, cl, req) }
	rebalance := func(member string) string {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Group, j.MemberID, j.ProtocolType = "h", member, "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
		j.Version = 3
		jr := do(&pinned{j, 3}).(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != 0 {
			t.Fatalf("join %d", jr.ErrorCode)
		}
		s := kmsg.NewPtrSyncGroupRequest()
		s.Group, s.MemberID, s.Generation = "h", jr.MemberID, jr.Generation
		s.ProtocolType, s.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
		s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("a")}}
		if sr := do(s).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
			t.Fatalf("sync %d", sr.ErrorCode)
		}
		return jr.MemberID
	}
	history := func(want int) *group.HistoryDoc {
		t.Helper()
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{"h"}
		d.Version = 5
		group.RequestHistory(d, -1)
		var doc *group.HistoryDoc
		testwait.For(t, 5*time.Second, "the history", func() bool { // the event is written after the sync answer
			r := do(&pinned{d, 5}).(*kmsg.DescribeGroupsResponse)
			got, ok := group.HistoryTagOf(&r.Groups[0])
			if ok && len(got.History) >= want {
				doc = got
			}
			return doc != nil
		})
		return doc
	}
	m := rebalance("")
	clk.Advance(time.Second)
	rebalance(m) // the leader's rejoin: a second event
	before := history(2)
	if len(before.History) != 2 || before.History[0].Cause.Kind != group.CauseMemberJoined || before.History[1].Cause.Kind != group.CauseMetadataChanged {
		t.Fatalf("before restart: %+v", before.History)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start(addr)
	defer n.Close()
	after := history(2)
	a, _ := json.Marshal(before.History)
	b, _ := json.Marshal(after.History)
	if string(a) != string(b) {
		t.Fatalf("history differs after restart:\nbefore %s\nafter  %s", a, b)
	}
	rebalance(m)
	if h := history(3).History; len(h) != 3 || h[2].Seq != 3 || h[2].Cause.Kind != group.CauseLoaded {
		t.Fatalf("after restart and a rebalance: %+v", h)
	}
}
