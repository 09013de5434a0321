package node

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// flakyStore refuses appends while fail is set, as etcd does for a while
// (a leader election, a timeout); it has no AppendMulti, so the node writes
// each partition on its own, as in cluster mode.
type flakyStore struct {
	store.Store
	fail atomic.Bool
}

func (f *flakyStore) Append(ctx context.Context, p int32, recs []store.Record) error {
	if f.fail.Load() {
		return errors.New("etcdserver: request timed out")
	}
	return f.Store.Append(ctx, p, recs)
}

// TestMetricsStormGaugeAfterReload: a KIP-848 group's rebalance is applied
// before its write is durable; when that write fails the coordinator reloads
// the partition from the store, which does not hold the rebalance. The
// rebalance is counted, and the storm it makes flagged, only once durable:
// cohort_groups_storming kept counting a group flagged by the failed
// rebalance until it stormed and calmed down again (the storm flags are
// now dropped with the partition's state and, besides, set only by durable
// rebalances), and the group's next rebalance flagged the same storm a
// second time in cohort_rebalance_storms_total.
func TestMetricsStormGaugeAfterReload(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.StormThreshold, cfg.StormWindow = 2, time.Minute
	st := &flakyStore{Store: memstore.New()}
	n := startLoaded(t, Config{
		Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Store: st, Group: cfg, Clock: clk,
		Rand: seeded{rand.NewChaCha8([32]byte{49})}, ClusterID: "test",
	})
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	addr := n.HTTPAddr()
	const g = "cg-storm-reload"
	beat := func(id string, epoch int32) int16 {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = g, id, epoch
		req.RebalanceTimeoutMillis = -1
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{"t"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("heartbeat of %s at epoch %d: %v", id, epoch, err)
		}
		return resp.ErrorCode
	}
	// Two rebalances stored: a joins (gets both partitions at once), a
	// leaves.
	if code := beat("a", 0); code != 0 {
		t.Fatalf("a's join: error %d", code)
	}
	if code := beat("a", -1); code != 0 {
		t.Fatalf("a's leave: error %d", code)
	}
	waitMetric(t, addr, 10*time.Second, eq(2), "cohort_rebalances_total", "type", "consumer")
	// The third, b's join, would flag the group; its write fails.
	st.fail.Store(true)
	if code := beat("b", 0); code == 0 {
		t.Fatal("b's join answered without error on a failing store")
	}
	st.fail.Store(false)
	// The partition reloads with two stored rebalances: the group is Empty
	// again (b's join was not stored) and not storming.
	waitDescribed(t, ctx, []string{n.Addr()}, g, 10*time.Second, func(d describe848) bool { return d.state == "Empty" })
	s := scrapeMetrics(t, addr)
	if v := s.value("cohort_groups_storming"); v != 0 {
		t.Errorf("cohort_groups_storming %v after the reload, want 0: the loaded group has 2 rebalances in the window (threshold 2)", v)
	}
	// b's join did not happen: the store holds two rebalances, and so
	// does the counter; nothing stormed.
	if v := s.value("cohort_rebalances_total", "type", "consumer"); v != 2 {
		t.Errorf("cohort_rebalances_total{type=consumer} %v after the reload, want the 2 stored: the failed one counted", v)
	}
	if v := s.value("cohort_rebalance_storms_total"); v != 0 {
		t.Errorf("cohort_rebalance_storms_total %v after the reload, want 0: flagged by a rebalance that failed", v)
	}
	// b joins again, stored this time: the group's one storm.
	if code := beat("b", 0); code != 0 {
		t.Fatalf("b's second join: error %d", code)
	}
	waitMetric(t, addr, 10*time.Second, eq(1), "cohort_groups_storming")
	s = scrapeMetrics(t, addr)
	if v := s.value("cohort_rebalance_storms_total"); v != 1 {
		t.Errorf("cohort_rebalance_storms_total %v after the stored third rebalance, want 1: one storm counted twice", v)
	}
	if v := s.value("cohort_rebalances_total", "type", "consumer"); v != 3 {
		t.Errorf("cohort_rebalances_total{type=consumer} %v, want 3", v)
	}
}
