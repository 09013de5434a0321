package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/node"
)

// TestDescribeAndWhyQuietMember: a classic member that stops heartbeating
// (a hung process) on a live node whose clock is fake. 30 s into its 45 s
// session, describe shows LAST-HEARD "30s ago of 45s" (and the JSON the same
// figures), and why names it with the 15 s left before its session timeout
// evicts it. A consumer-protocol member 3 s after its last heartbeat shows
// in its table, and is not called quiet. Once the classic member heartbeats,
// it is no longer called quiet either.
func TestDescribeAndWhyQuietMember(t *testing.T) {
	n, clk, c := fakeClockNode(t, time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), 51)
	c.ok("topic", "create", "work", "--partitions", "2")

	m := newRawMember(t, n.Addr(), "hung-app", 45*time.Second)
	j, err := m.join("qg")
	must(t, err)
	must(t, m.sync("qg", j.Generation, map[string][]int32{m.id: {0, 1}}))

	cm, hb, first := joinRaw848(t, n.Addr(), "cg", "cg-app", "cg-member-0001", 60000)
	hb.MemberEpoch, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = first.MemberEpoch, -1, nil, nil
	clk.Advance(27 * time.Second)
	hb.MemberEpoch = heartbeat(t, cm, hb).MemberEpoch
	clk.Advance(3 * time.Second)

	out := table(c.ok("group", "describe", "qg", "--members"))
	if !strings.Contains(out, "LAST-HEARD") || !strings.Contains(out, "qg "+m.id+" - hung-app 127.0.0.1 2 events(0,1) 30s ago of 45s") {
		t.Fatalf("describe does not show the member silent for 30 s:\n%s", out)
	}
	g := c.describeOne("qg")
	if mm := member(t, g, m.id); mm.LastHeardMsAgo == nil || *mm.LastHeardMsAgo != 30000 || *mm.SessionTimeoutMs != 45000 || mm.Parked {
		t.Fatalf("JSON: %+v", mm)
	}
	out = table(c.ok("group", "describe", "cg", "--members"))
	if !strings.Contains(out, "3s ago of 45s") {
		t.Fatalf("describe does not show the consumer member heard 3 s ago:\n%s", out)
	}

	why := c.ok("group", "why", "qg")
	t.Logf("cohort group why qg\n%s", why)
	wantIn(t, "why of a quiet member", why,
		"Quiet members: member "+m.id+" (client hung-app, host 127.0.0.1) has not been heard from for 30 s, more than half of its 45 s session: unless it heartbeats, its session timeout evicts it in 15 s.")
	if why := c.ok("group", "why", "cg"); strings.Contains(why, "Quiet members") {
		t.Fatalf("why calls a member heard 3 s ago quiet:\n%s", why)
	}

	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = "qg", m.id, j.Generation
	resp, err := req.RequestWith(rawCtx(t), m.cl)
	must(t, err)
	must(t, kerr.ErrorForCode(resp.ErrorCode))
	clk.Advance(time.Second)
	if why := c.ok("group", "why", "qg"); strings.Contains(why, "Quiet members") {
		t.Fatalf("why still calls the member quiet after its heartbeat:\n%s", why)
	}
	if out := table(c.ok("group", "describe", "qg", "--members")); !strings.Contains(out, " 1s ago of 45s") {
		t.Fatalf("describe after the heartbeat:\n%s", out)
	}
}

// TestQuietSentence: only members silent for more than half their session
// are named, a parked one never, and one whose session has run out is said
// to be evicted now.
func TestQuietSentence(t *testing.T) {
	mk := func(id string, silent, session int64, parked bool) memberDesc {
		return memberDesc{MemberID: id, ClientID: "c", Host: "h", LastHeardMsAgo: &silent, SessionTimeoutMs: &session, Parked: parked}
	}
	got := quietSentence([]memberDesc{mk("a", 22000, 45000, false), mk("b", 23000, 45000, false), mk("c", 0, 45000, true),
		mk("d", 46000, 45000, false), {MemberID: "e"}})
	for _, want := range []string{"member b (client c, host h) has not been heard from for 23 s, more than half of its 45 s session: unless it heartbeats, its session timeout evicts it in 22 s.",
		"member d (client c, host h) has not been heard from for 46 s, more than half of its 45 s session: its session has run out"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q\nlacks %q", got, want)
		}
	}
	for _, not := range []string{"member a", "member c", "member e"} {
		if strings.Contains(got, not) {
			t.Errorf("%q names %s", got, not)
		}
	}
	if quietSentence([]memberDesc{mk("a", 1000, 45000, false)}) != "" {
		t.Errorf("a member heard 1 s ago is quiet")
	}
}

// joinRaw848 joins a hand-driven consumer-protocol member id of grp,
// subscribed to "work" (rebalance timeout rebalanceMs), and returns its
// client, its first heartbeat and the answer.
func joinRaw848(t *testing.T, addr, grp, client, id string, rebalanceMs int32) (*kgo.Client, *kmsg.ConsumerGroupHeartbeatRequest, *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	raw, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(client))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = grp, id, 0
	hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames, hb.Topics = rebalanceMs, []string{"work"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return raw, hb, heartbeat(t, raw, hb)
}

// fakeClockNode starts a node on 127.0.0.1 whose clock is a fake one at t0
// (member ids from a source seeded with seed) and a cli on the same clock.
func fakeClockNode(t *testing.T, t0 time.Time, seed byte) (*node.Node, *clock.Fake, cli) {
	t.Helper()
	clk := clock.NewFake(t0)
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	n := startNodeConfig(t, node.Config{Listen: "127.0.0.1:0", Group: cfg, Clock: clk, Rand: rand.NewChaCha8([32]byte{seed})})
	return n, clk, cli{t: t, base: []string{"--bootstrap", n.Addr()}, clock: clk}
}
