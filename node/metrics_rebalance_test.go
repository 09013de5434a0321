package node

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestMetricsRebalanceCauses (issue 16): on the fake clock, one classic
// group goes through a rebalance of each of the causes member_joined (twice),
// member_left and session_timeout; after each, cohort_rebalances_total moves
// by exactly one for that cause and no other, and the join and sync duration
// histograms by exactly one sample each. The storm detector (threshold 3 in
// a minute) flags the group at the fourth rebalance:
// cohort_rebalance_storms_total goes to 1 and cohort_groups_storming to 1;
// the group's partition released and loaded again is still flagged and not
// counted again; back to 0 once the window has passed the rebalances; the
// log names the group at each change of the flag.
func TestMetricsRebalanceCauses(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = time.Second
	cfg.StormThreshold, cfg.StormWindow = 3, time.Minute
	logs := &logTail{}
	n := startLoaded(t, Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Store: memstore.New(), Group: cfg, Clock: clk,
		Rand:      seeded{rand.NewChaCha8([32]byte{16})},
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		ClusterID: "test",
	})
	t.Cleanup(func() { n.Close() })
	addr := n.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	causes := []group.CauseKind{group.CauseMemberJoined, group.CauseMetadataChanged, group.CauseMemberLeft,
		group.CauseSessionTimeout, group.CauseRebalanceTimeout, group.CauseSyncTimeout, group.CauseOther}
	type counts struct {
		cause                 map[group.CauseKind]float64
		join, sync            float64
		storms, storming, all float64
	}
	read := func() counts {
		s := scrapeMetrics(t, addr)
		c := counts{cause: map[group.CauseKind]float64{},
			join:     s.value("cohort_rebalance_join_duration_seconds", "type", "classic"),
			sync:     s.value("cohort_rebalance_sync_duration_seconds", "type", "classic"),
			storms:   s.value("cohort_rebalance_storms_total"),
			storming: s.value("cohort_groups_storming"),
			all:      s.value("cohort_rebalances_total"),
		}
		for _, k := range causes {
			c.cause[k] = s.value("cohort_rebalances_total", "type", "classic", "cause", string(k))
		}
		return c
	}
	last := read()
	for _, k := range causes {
		if last.cause[k] != 0 {
			t.Fatalf("cohort_rebalances_total{cause=%s} is %v before any group (want the series at 0)", k, last.cause[k])
		}
	}
	if last.storming != 0 || last.storms != 0 {
		t.Fatalf("storms %v, storming %v before any group", last.storms, last.storming)
	}
	// step waits (bounded) until one more rebalance was counted, then
	// checks that it was exactly one, of cause want, with one sample in
	// each phase histogram.
	step := func(want group.CauseKind) counts {
		t.Helper()
		waitMetric(t, addr, 10*time.Second, eq(last.all+1), "cohort_rebalances_total")
		now := read()
		for _, k := range causes {
			d := now.cause[k] - last.cause[k]
			if k == want && d != 1 || k != want && d != 0 {
				t.Errorf("after a %s rebalance: cohort_rebalances_total{cause=%s} moved by %v", want, k, d)
			}
		}
		if now.join != last.join+1 || now.sync != last.sync+1 {
			t.Errorf("after a %s rebalance: join samples %v→%v, sync samples %v→%v, want one more each",
				want, last.join, now.join, last.sync, now.sync)
		}
		last = now
		return now
	}

	a, b := newRawMember(t, ctx, n.Addr(), "A"), newRawMember(t, ctx, n.Addr(), "B")
	// 1. A creates the group.
	a.join()
	a.sync(a)
	step(group.CauseMemberJoined)
	// 2. B joins: its JoinGroup waits for A's rejoin.
	bj := make(chan struct{})
	go func() { b.join(); close(bj) }()
	waitGroupState(t, ctx, a, "PreparingRebalance")
	a.join()
	<-bj
	bs := make(chan struct{})
	go func() { b.sync(); close(bs) }()
	a.sync(a, b)
	<-bs
	step(group.CauseMemberJoined)
	// 3. B leaves; A rejoins alone.
	b.leave()
	a.join()
	a.sync(a)
	if c := step(group.CauseMemberLeft); c.storms != 0 || c.storming != 0 {
		t.Errorf("three rebalances in the window (threshold 3): storms %v, storming %v", c.storms, c.storming)
	}
	// 4. A stops heartbeating: its session expires on the fake clock, the
	// group is Empty. The fourth rebalance in a minute flags the storm.
	clk.Advance(11 * time.Second)
	c := step(group.CauseSessionTimeout)
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_groups_storming")
	if want := `level=WARN msg="group rebalancing in a storm (see cohort group why)" group=`; !logs.has(want) || !logs.has("rebalances=4 threshold=3 window=1m0s") {
		t.Errorf("no storm line %q in the log", want)
	}
	if c := read(); c.storms != 1 {
		t.Errorf("cohort_rebalance_storms_total %v after the flag, want 1", c.storms)
	}
	// The group's partition leaves the node and comes back (cluster mode:
	// handed over, later taken over again; or another node loading it):
	// the gauge follows, and the node that loads it flags the group again,
	// but it is the same storm, counted once (summed over the nodes, a
	// storm that moved counted once more at each move), and the log line
	// says it was flagged at the load.
	p := coordinator.PartitionFor(rawGroup, n.coord.Partitions())
	n.coord.Release(p)
	waitMetric(t, addr, 10*time.Second, eq(0), "cohort_groups_storming")
	n.coord.Acquire(p)
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_groups_storming")
	if c := read(); c.storms != 1 {
		t.Errorf("cohort_rebalance_storms_total %v after the group's partition loaded again, want 1 (the same storm)", c.storms)
	}
	if want := `session_timeout=1" loaded=true`; !logs.has(want) {
		t.Errorf("no storm line ending %q in the log after the load", want)
	}
	// The window passes the first rebalances: unflagged, the count of
	// storms stays.
	clk.Advance(time.Minute)
	waitMetric(t, addr, 10*time.Second, eq(0), "cohort_groups_storming")
	if want := `level=INFO msg="group no longer rebalancing in a storm" group=`; !logs.has(want) {
		t.Errorf("no line %q in the log", want)
	}
	if c2 := read(); c2.storms != 1 || c2.all != c.all {
		t.Errorf("after the window: storms %v (want 1), rebalances %v (want %v)", c2.storms, c2.all, c.all)
	}
}

// rawMember is one classic group member speaking JoinGroup, SyncGroup and
// LeaveGroup itself, on its own client (a JoinGroup held by the join
// barrier must not hold up another member's requests).
type rawMember struct {
	t   *testing.T
	ctx context.Context
	cl  *kgo.Client
	id  string
	gen int32
}

const rawGroup = "rebalance-causes"

func newRawMember(t *testing.T, ctx context.Context, addr, name string) *rawMember {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &rawMember{t: t, ctx: ctx, cl: cl}
}

func (m *rawMember) join() {
	j := kmsg.NewPtrJoinGroupRequest()
	j.Group, j.MemberID, j.ProtocolType = rawGroup, m.id, "consumer"
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 10000, 10000
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("m")}}
	for range 2 {
		r, err := j.RequestWith(m.ctx, m.cl)
		if err != nil {
			m.t.Errorf("join: %v", err)
			return
		}
		if r.ErrorCode == kerr.MemberIDRequired.Code { // KIP-394
			j.MemberID = r.MemberID
			continue
		}
		if r.ErrorCode != 0 {
			m.t.Errorf("join: error %d", r.ErrorCode)
			return
		}
		m.id, m.gen = r.MemberID, r.Generation
		return
	}
}

// sync sends SyncGroup; the leader gives each member of assign one byte.
func (m *rawMember) sync(assign ...*rawMember) {
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = rawGroup, m.id, m.gen
	s.ProtocolType, s.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for _, o := range assign {
		s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: o.id, MemberAssignment: []byte("a")})
	}
	if r, err := s.RequestWith(m.ctx, m.cl); err != nil || r.ErrorCode != 0 {
		m.t.Errorf("sync: %v %+v", err, r)
	}
}

func (m *rawMember) leave() {
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Group = rawGroup
	l.Members = []kmsg.LeaveGroupRequestMember{{MemberID: m.id}}
	if r, err := l.RequestWith(m.ctx, m.cl); err != nil || r.ErrorCode != 0 {
		m.t.Errorf("leave: %v %+v", err, r)
	}
}

// waitGroupState waits (bounded) until DescribeGroups says the group is in
// state.
func waitGroupState(t *testing.T, ctx context.Context, m *rawMember, state string) {
	t.Helper()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{rawGroup}
	var got string
	waitFor := func() bool {
		r, err := d.RequestWith(ctx, m.cl)
		if err == nil && len(r.Groups) == 1 {
			got = r.Groups[0].State
		}
		return got == state
	}
	if !testwait.Until(10*time.Second, waitFor) { // another client's effect
		t.Fatalf("group %s in state %q, want %s", rawGroup, got, state)
	}
}
