package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
)

// TestHistorySurvivesRestart: a group's rebalance history, asked for with
// DescribeGroups tag 10001, is the same after the node restarts on its disk
// store, and the next rebalance continues its numbering.
func TestHistorySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	start := func(addr string) *Node {
		return startLoaded(t, Config{
			Listen: addr, DataDir: dir, Group: cfg, Clock: clk,
			Rand:   seeded{rand.NewChaCha8([32]byte{6})},
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
	}
	n := start("127.0.0.1:0")
	addr := n.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	do := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		for i := 0; i < 100; i++ {
			resp, err := cl.Request(ctx, req)
			if err == nil {
				return resp
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%T: no answer", req)
		return nil
	}
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
		for i := 0; i < 100; i++ {
			r := do(&pinned{d, 5}).(*kmsg.DescribeGroupsResponse)
			if doc, ok := group.HistoryTagOf(&r.Groups[0]); ok && len(doc.History) >= want {
				return doc
			}
			time.Sleep(20 * time.Millisecond) // the event is written after the sync answer
		}
		t.Fatal("no history")
		return nil
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
