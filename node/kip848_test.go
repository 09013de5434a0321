package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/store/memstore"
)

// owners tracks, from the consumers' own callbacks, which consumer owns
// which partition right now, and fails at once if two own the same one.
type owners struct {
	mu  sync.Mutex
	t   *testing.T
	own map[int32]string
	bad string
}

func (o *owners) assigned(who string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if cur, ok := o.own[p]; ok && cur != who && o.bad == "" {
			o.bad = fmt.Sprintf("partition %d given to %s while %s owns it", p, who, cur)
		}
		o.own[p] = who
	}
}

func (o *owners) revoked(who string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		if o.own[p] == who {
			delete(o.own, p)
		}
	}
}

func (o *owners) count() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := map[string]int{}
	for _, w := range o.own {
		n[w]++
	}
	return n
}

// TestKIP848FranzGo: franz-go consumers with kgo.ServerSideBalancer() use
// the consumer group protocol (ConsumerGroupHeartbeat) against a node:
// they share a catalog topic's partitions evenly, never two owning the same
// partition (checked from their own assign/revoke callbacks), take over the
// partitions of a consumer that leaves, and commit; ConsumerGroupDescribe
// and ListGroups show the group as a consumer-type group.
func TestKIP848FranzGo(t *testing.T) {
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond // the members learn of changes sooner
	n := startLoaded(t, Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: cfg, ClusterID: "test",
		Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "work"); err != nil {
		t.Fatal(err)
	}
	o := &owners{t: t, own: map[int32]string{}}
	var heartbeats sync.Map // consumers that sent a ConsumerGroupHeartbeat
	start := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(n.Addr()), kgo.ClientID(name),
			kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("work"),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.FetchMaxWait(500*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.assigned(name, m["work"]) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.revoked(name, m["work"]) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { o.revoked(name, m["work"]) }),
			kgo.WithHooks(hbHook{name: name, seen: &heartbeats}),
		)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil {
				if f := cl.PollFetches(ctx); f.IsClientClosed() {
					return
				}
			}
		}()
		return cl
	}
	waitCounts := func(want map[string]int) {
		t.Helper()
		for {
			got := o.count()
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if o.bad != "" {
				t.Fatal(o.bad)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("ownership %v, want %v", got, want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	a, b, c := start("a"), start("b"), start("c")
	defer a.Close()
	defer b.Close()
	waitCounts(map[string]int{"a": 2, "b": 2, "c": 2})
	for _, name := range []string{"a", "b", "c"} {
		if _, ok := heartbeats.Load(name); !ok {
			t.Fatalf("consumer %s never sent a ConsumerGroupHeartbeat: it used the classic protocol", name)
		}
	}
	// Describe it the KIP-848 way.
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g848"}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Groups[0]
	if d.ErrorCode != 0 || len(d.Members) != 3 || d.AssignorName == "" || d.Epoch < 1 {
		t.Fatalf("ConsumerGroupDescribe: %+v", d)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["g848"]; !ok || g.ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", listed)
	}
	// c commits what it has and leaves: a and b take over its partitions.
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	c.Close()
	waitCounts(map[string]int{"a": 3, "b": 3})
	if o.bad != "" {
		t.Fatal(o.bad)
	}
	var ids []string
	resp, err = req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Groups[0].Members {
		ids = append(ids, m.ClientID)
	}
	slices.Sort(ids)
	if fmt.Sprint(ids) != "[a b]" {
		t.Fatalf("members after c left: %v", ids)
	}
}

// hbHook notes which clients sent a ConsumerGroupHeartbeat.
type hbHook struct {
	name string
	seen *sync.Map
}

func (h hbHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 68 && err == nil {
		h.seen.Store(h.name, true)
	}
}
