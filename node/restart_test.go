package node

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
)

// TestRestartKeepsStateAndEvictsSilentMembers restarts a node on its disk
// store (clean shutdown) and checks that groups, assignments and offsets
// are back; that a follower heartbeating within its session keeps its
// generation; and that a member that stays silent is evicted and the group
// rebalances. Session timeouts run on an injected fake clock.
func TestRestartKeepsStateAndEvictsSilentMembers(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	start := func(addr string) *Node {
		return startLoaded(t, Config{
			Listen: addr, DataDir: dir, Group: cfg, Clock: clk,
			Rand:   seeded{rand.NewChaCha8([32]byte{5})},
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
	}
	n := start("127.0.0.1:0")
	addr := n.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One client per member: a parked JoinGroup holds its connection.
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl, clB := newClient(), newClient()
	doOn := func(cl *kgo.Client, req kmsg.Request) kmsg.Response {
		t.Helper()
		for i := 0; i < 100; i++ { // through restarts: retry until the node answers
			resp, err := cl.Request(ctx, req)
			if err == nil {
				return resp
			}
			if i == 0 {
				t.Logf("%T: %v (retrying)", req, err) // e.g. while the node restarts
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%T: no answer", req)
		return nil
	}
	do := func(req kmsg.Request) kmsg.Response { return doOn(cl, req) }
	join := func(cl *kgo.Client, member string) *kmsg.JoinGroupResponse {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Group, j.MemberID, j.ProtocolType = "r", member, "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
		j.Version = 3 // no MEMBER_ID_REQUIRED round trip; pinned keeps kgo from raising it
		return doOn(cl, &pinned{j, 3}).(*kmsg.JoinGroupResponse)
	}
	// Two members: the first joins alone (generation 1), the second's join
	// rebalances; both rejoin in parallel.
	a := join(cl, "")
	type jr = *kmsg.JoinGroupResponse
	bch := make(chan jr, 1)
	go func() { bch <- join(clB, "") }()
	for i := 0; i < 200; i++ { // wait until b's join is parked
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{"r"}
		if do(d).(*kmsg.DescribeGroupsResponse).Groups[0].State == "PreparingRebalance" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	a = join(cl, a.MemberID)
	b := <-bch
	if a.Generation != 2 || b.Generation != 2 || a.LeaderID != a.MemberID {
		t.Fatalf("setup: %+v %+v", a, b)
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = "r", a.MemberID, a.Generation
	pt, pn := "consumer", "range" // required from SyncGroup v5, which kgo sends
	s.ProtocolType, s.Protocol = &pt, &pn
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: a.MemberID, MemberAssignment: []byte("A")}, {MemberID: b.MemberID, MemberAssignment: []byte("B")}}
	if r := do(s).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Group, c.MemberID, c.Generation = "r", b.MemberID, b.Generation
	c.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1234, LeaderEpoch: -1}}}}
	if r := do(c).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = start(addr)
	defer n.Close()

	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"r"}
	g := do(d).(*kmsg.DescribeGroupsResponse).Groups[0]
	if g.State != "Stable" || len(g.Members) != 2 {
		t.Fatalf("after restart: %+v", g)
	}
	for _, m := range g.Members {
		want := map[string]string{a.MemberID: "A", b.MemberID: "B"}[m.MemberID]
		if string(m.MemberAssignment) != want {
			t.Fatalf("member %s assignment %q", m.MemberID, m.MemberAssignment)
		}
	}
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Group = "r"
	f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if o := do(f).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset; o != 1234 {
		t.Fatalf("offset %d", o)
	}
	// b heartbeats within its session and keeps generation 2; a stays silent.
	hb := func(m string) int16 {
		h := kmsg.NewPtrHeartbeatRequest()
		h.Group, h.MemberID, h.Generation = "r", m, 2
		return do(h).(*kmsg.HeartbeatResponse).ErrorCode
	}
	clk.Advance(6 * time.Second)
	if code := hb(b.MemberID); code != 0 {
		t.Fatalf("live follower after restart: %d", code)
	}
	clk.Advance(5 * time.Second) // a's session (10 s from load) has expired
	var code int16
	for i := 0; i < 200; i++ {
		if code = hb(b.MemberID); code == group.ErrRebalanceInProgress {
			break
		}
		time.Sleep(5 * time.Millisecond) // the loop handles the timer asynchronously
	}
	if code != group.ErrRebalanceInProgress {
		t.Fatalf("silent member not evicted: heartbeat %d", code)
	}
	g = do(d).(*kmsg.DescribeGroupsResponse).Groups[0]
	if len(g.Members) != 1 || g.Members[0].MemberID != b.MemberID {
		t.Fatalf("members after eviction: %+v", g.Members)
	}
}
