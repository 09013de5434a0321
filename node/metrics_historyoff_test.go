package node

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestMetricsCountWithHistoryOff: a node that keeps no history
// (--group-history 0) still counts its rebalances. On the fake clock a
// classic group is created by a join and emptied by a session timeout, and a
// consumer-protocol group's member joins and reconciles:
// cohort_rebalances_total counts each under its type and cause,
// cohort_group_member_timeouts_total the session timeout, and the phase
// histograms one sample per rebalance; the history served stays empty.
func TestMetricsCountWithHistoryOff(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = time.Second
	cfg.HistorySize = -1
	n := startLoaded(t, Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Store: memstore.New(), Group: cfg, Clock: clk,
		Rand: seeded{rand.NewChaCha8([32]byte{52})}, ClusterID: "test",
	})
	t.Cleanup(func() { n.Close() })
	addr := n.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Classic: A creates the group, then its session expires.
	a := newRawMember(t, ctx, n.Addr(), "A")
	a.join()
	a.sync(a)
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_rebalances_total", "type", "classic", "cause", "member_joined")
	// No history is kept all the same.
	noHistory := func(g string) {
		t.Helper()
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Version, d.Groups = 5, []string{g}
		group.RequestHistory(d, -1)
		r := answered(t, ctx, a.cl, &pinned{d, 5}).(*kmsg.DescribeGroupsResponse)
		if doc, ok := group.HistoryTagOf(&r.Groups[0]); !ok || !doc.HistoryOff || len(doc.History) != 0 {
			t.Errorf("group %s: history doc %+v (ok %v), want history_off and no event", g, doc, ok)
		}
	}
	noHistory(rawGroup)
	clk.Advance(11 * time.Second)
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_rebalances_total", "type", "classic", "cause", "session_timeout")
	s := scrapeMetrics(t, addr)
	if v := s.value("cohort_group_member_timeouts_total", "type", "classic", "timeout", "session_timeout"); v != 1 {
		t.Errorf("classic session timeouts %v, want 1", v)
	}
	if j, y := s.value("cohort_rebalance_join_duration_seconds", "type", "classic"), s.value("cohort_rebalance_sync_duration_seconds", "type", "classic"); j != 2 || y != 2 {
		t.Errorf("classic join samples %v, sync samples %v, want 2 each", j, y)
	}

	// Consumer protocol: one member joins and reconciles.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = "cg-off", "c1", 0
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 60000, []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r, err := req.RequestWith(ctx, cl)
	if err != nil || r.ErrorCode != 0 {
		t.Fatalf("join: %v %+v", err, r)
	}
	req = kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "cg-off", "c1", r.MemberEpoch, -1
	if r.Assignment != nil {
		for _, tp := range r.Assignment.Topics {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
		}
	}
	if r, err := req.RequestWith(ctx, cl); err != nil || r.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v %+v", err, r)
	}
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_rebalances_total", "type", "consumer", "cause", "member_joined")
	noHistory("cg-off")
}
