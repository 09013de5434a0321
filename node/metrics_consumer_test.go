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

// TestMetricsConsumerProtocolGroup: a KIP-848 group driven with raw
// ConsumerGroupHeartbeats on a real node shows in the scrape as a consumer
// group (cohort_groups{type="consumer"}, cohort_group_members), its
// rebalances count under type consumer with their causes, and once deleted
// it leaves no group counted.
func TestMetricsConsumerProtocolGroup(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	n := startLoaded(t, Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Store: memstore.New(), Group: cfg, Clock: clk,
		Rand: seeded{rand.NewChaCha8([32]byte{48})}, ClusterID: "test",
	})
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	addr := n.HTTPAddr()
	const g = "cg-metrics"
	beat := func(id string, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = g, id, epoch
		req.RebalanceTimeoutMillis = -1
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{"t"}
		}
		req.Topics = owned
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s at epoch %d: %v %+v", id, epoch, err, resp)
		}
		return resp
	}
	owned := func(r *kmsg.ConsumerGroupHeartbeatResponse) []kmsg.ConsumerGroupHeartbeatRequestTopic {
		var out []kmsg.ConsumerGroupHeartbeatRequestTopic
		if r.Assignment != nil {
			for _, tp := range r.Assignment.Topics {
				out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
			}
		}
		return out
	}
	r := beat("a", 0, []kmsg.ConsumerGroupHeartbeatRequestTopic{})
	beat("a", r.MemberEpoch, owned(r)) // a reconciled: the join's rebalance is complete
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_groups", "type", "consumer", "state", "Stable")
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_group_members", "type", "consumer")
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_rebalances_total", "type", "consumer", "cause", "member_joined")
	s := scrapeMetrics(t, addr)
	if v := s.value("cohort_rebalances_total", "type", "classic"); v != 0 {
		t.Errorf("classic rebalances %v, want 0", v)
	}
	if v := s.value("cohort_groups", "type", "classic"); v != 0 {
		t.Errorf("classic groups %v, want 0", v)
	}
	// a leaves: the group is empty, the leave's rebalance ends at once.
	beat("a", -1, nil)
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_groups", "type", "consumer", "state", "Empty")
	waitMetric(t, addr, 10*time.Second, eq(0), "cohort_group_members", "type", "consumer")
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_rebalances_total", "type", "consumer", "cause", "member_left")
	// Deleted: no group left.
	if _, err := kadm.NewClient(cl).DeleteGroup(ctx, g); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, addr, 10*time.Second, eq(0), "cohort_groups")
	s = scrapeMetrics(t, addr)
	if v := s.value("cohort_rebalances_total"); v != 2 {
		t.Errorf("rebalances %v after a join and a leave, want 2", v)
	}
}
