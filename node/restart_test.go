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
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
)

// restartable returns a fake clock and a function that starts a node on one
// disk store (in t's temporary directory) with it, a random source seeded
// with seed and the group defaults with no initial rebalance delay: for
// tests that stop a node and start it again on its store.
func restartable(t *testing.T, seed byte) (*clock.Fake, func(addr string) *Node) {
	dir := t.TempDir()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	return clk, func(addr string) *Node {
		return startLoaded(t, Config{
			Listen: addr, DataDir: dir, Group: cfg, Clock: clk,
			Rand:   seeded{rand.NewChaCha8([32]byte{seed})},
			Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
	}
}

// answered sends req through cl again until it is answered (bounded: 10 s),
// as through a restart the node may not listen yet; it fails the test
// otherwise.
func answered(t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	var resp kmsg.Response
	logged := false
	if err := testwait.Err(10*time.Second, func() (err error) {
		if resp, err = cl.Request(ctx, req); err != nil && !logged {
			t.Logf("%T: %v (retrying)", req, err) // e.g. while the node restarts
			logged = true
		}
		return err
	}); err != nil {
		t.Fatalf("%T: no answer: %v", req, err)
	}
	return resp
}

// TestRestartKeepsStateAndEvictsSilentMembers restarts a node on its disk
// store (clean shutdown) and checks that groups, assignments and offsets
// are back; that a follower heartbeating within its session keeps its
// generation; and that a member that stays silent is evicted and the group
// rebalances. Session timeouts run on an injected fake clock.
func TestRestartKeepsStateAndEvictsSilentMembers(t *testing.T) {
	clk, start := restartable(t, 5)
	n := start("127.0.0.1:0")
	addr := n.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// One client per member: a parked JoinGroup holds its connection.
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), byname.Opt())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	cl, clB := newClient(), newClient()
	doOn := func(cl *kgo.Client, req kmsg.Request) kmsg.Response { t.Helper(); return answered(t, ctx, cl, req) }
	do := func(req kmsg.Request) kmsg.Response { return doOn(cl, req) }
	joinReq := func(member string) kmsg.Request {
		j := kmsg.NewPtrJoinGroupRequest()
		j.Group, j.MemberID, j.ProtocolType = "r", member, "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
		j.Version = 3 // no MEMBER_ID_REQUIRED round trip; pinned keeps kgo from raising it
		return &pinned{j, 3}
	}
	join := func(cl *kgo.Client, member string) *kmsg.JoinGroupResponse {
		return doOn(cl, joinReq(member)).(*kmsg.JoinGroupResponse)
	}
	// Two members: the first joins alone (generation 1), the second's join
	// rebalances; both rejoin in parallel.
	a := join(cl, "")
	// b's join is sent from a goroutine (it parks until a rejoins), which
	// must not call t.Fatal: its outcome comes back on bch. a rejoins only
	// once b's join is parked: rejoining alone would complete a's
	// rebalance and leave b's join parked on the fake clock for good.
	type jr struct {
		resp kmsg.Response
		err  error
	}
	bch := make(chan jr, 1)
	go func() { r, err := clB.Request(ctx, joinReq("")); bch <- jr{r, err} }()
	testwait.For(t, 30*time.Second, "b's join parked", func() bool {
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{"r"}
		return do(d).(*kmsg.DescribeGroupsResponse).Groups[0].State == "PreparingRebalance"
	})
	a = join(cl, a.MemberID)
	var b *kmsg.JoinGroupResponse
	select {
	case r := <-bch:
		if r.err != nil {
			t.Fatalf("b's join: %v", r.err)
		}
		b = r.resp.(*kmsg.JoinGroupResponse)
	case <-time.After(30 * time.Second):
		t.Fatal("b's join was not answered")
	}
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
	testwait.Until(5*time.Second, func() bool { // the loop handles the timer asynchronously
		code = hb(b.MemberID)
		return code == group.ErrRebalanceInProgress
	})
	if code != group.ErrRebalanceInProgress {
		t.Fatalf("silent member not evicted: heartbeat %d", code)
	}
	g = do(d).(*kmsg.DescribeGroupsResponse).Groups[0]
	if len(g.Members) != 1 || g.Members[0].MemberID != b.MemberID {
		t.Fatalf("members after eviction: %+v", g.Members)
	}
}
