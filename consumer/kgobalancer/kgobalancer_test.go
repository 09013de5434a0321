package kgobalancer_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/kgobalancer"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topics = []string{"alpha", "beta"}

const partitions = 5

func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, a := range c.ListenAddrs() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("kfake listens on %s, want loopback", a)
		}
	}
	return c
}

// member is one group member of any client library, reporting what it owns.
type member struct {
	name string
	mu   sync.Mutex
	id   string
	gen  int32
	own  map[string][]int32
}

func (m *member) set(id string, gen int32, own map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.id, m.gen, m.own = id, gen, map[string][]int32{}
	for t, ps := range own {
		if len(ps) > 0 {
			m.own[t] = slices.Sorted(slices.Values(ps))
		}
	}
}

func (m *member) get() (string, int32, map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, m.gen, maps.Clone(m.own)
}

// startKgo runs a franz-go group member with the given balancer until the
// test ends.
func startKgo(t *testing.T, c *kfake.Cluster, group string, b kgo.GroupBalancer) *member {
	t.Helper()
	m := &member{name: "kgo/" + b.ProtocolName()}
	// The callbacks see deltas; fold them into the current assignment.
	own := map[string][]int32{}
	change := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, cl *kgo.Client, delta map[string][]int32) {
			for t, ps := range delta {
				if add {
					own[t] = append(own[t], ps...)
				} else {
					own[t] = slices.DeleteFunc(own[t], func(p int32) bool { return slices.Contains(ps, p) })
				}
			}
			id, gen := cl.GroupMetadata()
			m.set(id, gen, own)
		}
	}
	var cl *kgo.Client
	var err error
	cl, err = kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.Balancers(b),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(5*time.Second),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(change(true)),
		kgo.OnPartitionsRevoked(change(false)),
		kgo.OnPartitionsLost(change(false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return m
}

type handler struct{ m *member }

func (h handler) Setup(s sarama.ConsumerGroupSession) error {
	h.m.set(s.MemberID(), s.GenerationID(), s.Claims())
	return nil
}
func (h handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h handler) ConsumeClaim(s sarama.ConsumerGroupSession, _ sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}

// startSarama runs a sarama group member with the given strategy until the
// test ends.
func startSarama(t *testing.T, c *kfake.Cluster, group string, s sarama.BalanceStrategy) *member {
	t.Helper()
	m := &member{name: "sarama/" + s.Name()}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{s}
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = 5 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.RefreshFrequency = 0
	g, err := sarama.NewConsumerGroup(c.ListenAddrs(), group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, topics, handler{m}); err != nil && ctx.Err() == nil {
				select { // retry pacing, ended with the test
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; g.Close() })
	return m
}

// converged waits, bounded by a deadline, until all members report the same
// generation and each owns exactly what a computes for the group. It returns
// a description of the last state seen on timeout.
func converged(t *testing.T, a assign.Assignor, ms []*member, within time.Duration) {
	t.Helper()
	md := map[string]assign.Topic{}
	for _, tp := range topics {
		md[tp] = assign.Topic{Name: tp, Partitions: partitions}
	}
	var last string
	if testwait.Until(within, func() bool {
		ok, state := check(a, ms, md)
		last = state
		return ok
	}) {
		return
	}
	t.Fatalf("group did not converge within %v; last state:\n%s", within, last)
}

func check(a assign.Assignor, ms []*member, md map[string]assign.Topic) (bool, string) {
	var sb strings.Builder
	var group []assign.Member
	gens := map[int32]bool{}
	owns := map[string]map[string][]int32{}
	for _, m := range ms {
		id, gen, own := m.get()
		fmt.Fprintf(&sb, "  %s id=%q gen=%d own=%v\n", m.name, id, gen, own)
		if id == "" {
			return false, sb.String()
		}
		gens[gen] = true
		owns[id] = own
		group = append(group, assign.Member{ID: id, Topics: topics, Generation: -1})
	}
	if len(gens) != 1 {
		return false, sb.String()
	}
	want, err := a.Assign(group, md)
	if err != nil {
		return false, err.Error()
	}
	for id, own := range owns {
		exp := map[string][]int32{}
		for _, tp := range want[id].Partitions {
			exp[tp.Topic] = tp.Partitions
		}
		if !reflect.DeepEqual(exp, own) {
			fmt.Fprintf(&sb, "  want %s: %v\n", id, exp)
			return false, sb.String()
		}
	}
	return true, sb.String()
}

func init() { sarama.Logger = log.New(io.Discard, "", 0) }

func TestThreeMembersConvergeOnAssignor(t *testing.T) {
	for _, a := range []assign.Assignor{assign.RoundRobin(), assign.Copartition(topics)} {
		t.Run(a.Name(), func(t *testing.T) {
			c := newCluster(t)
			var ms []*member
			for i := 0; i < 3; i++ {
				ms = append(ms, startKgo(t, c, "g-"+a.Name(), kgobalancer.New(a)))
			}
			converged(t, a, ms, 30*time.Second)
		})
	}
}

// Mixed group: franz-go members with cohort's range through the adapter,
// a plain franz-go member with kgo.RangeBalancer and a sarama member with
// its range strategy. Each run lets a different one join first, and the
// first member to join leads.
func TestMixedGroupAgreesWhoeverLeads(t *testing.T) {
	var cohortLed *spy
	starters := []func(t *testing.T, c *kfake.Cluster, g string) *member{
		func(t *testing.T, c *kfake.Cluster, g string) *member {
			return startKgo(t, c, g, kgobalancer.New(cohortLed))
		},
		func(t *testing.T, c *kfake.Cluster, g string) *member { return startKgo(t, c, g, kgo.RangeBalancer()) },
		func(t *testing.T, c *kfake.Cluster, g string) *member {
			return startSarama(t, c, g, sarama.NewBalanceStrategyRange())
		},
	}
	names := []string{"cohort-range", "kgo-range", "sarama-range"}
	for first := range starters {
		t.Run("leader="+names[first], func(t *testing.T) {
			cohortLed = &spy{Assignor: assign.Range()}
			c := newCluster(t)
			g := "mixed-" + names[first]
			leader := starters[first](t, c, g)
			converged(t, assign.Range(), []*member{leader}, 20*time.Second)
			ms := []*member{leader}
			for i, s := range starters {
				if i != first {
					ms = append(ms, s(t, c, g))
				}
			}
			converged(t, assign.Range(), ms, 30*time.Second)
			// Evidence of who led: the adapter's assignor ran for the
			// whole group only when the cohort member joined first.
			if got := cohortLed.largest(); (first == 0) != (got == len(ms)) {
				t.Errorf("cohort adapter assigned a group of at most %d members; first joiner %s", got, names[first])
			}
		})
	}
}

// spy records the largest group an assignor was asked to assign.
type spy struct {
	assign.Assignor
	mu  sync.Mutex
	max int
}

func (s *spy) Assign(ms []assign.Member, md map[string]assign.Topic) (map[string]assign.Assignment, error) {
	s.mu.Lock()
	s.max = max(s.max, len(ms))
	s.mu.Unlock()
	return s.Assignor.Assign(ms, md)
}

func (s *spy) largest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

type coop struct{ assign.Assignor }

func (coop) Cooperative() bool { return true }

func TestCooperativeFlagAndMetadata(t *testing.T) {
	if kgobalancer.New(assign.Range()).IsCooperative() {
		t.Error("range announced as cooperative")
	}
	b := kgobalancer.New(coop{assign.RoundRobin()}, kgobalancer.WithRack("r1"))
	if !b.IsCooperative() || b.ProtocolName() != "roundrobin" {
		t.Errorf("cooperative=%v name=%q", b.IsCooperative(), b.ProtocolName())
	}
	raw := b.JoinGroupMetadata([]string{"a", "b"}, map[string][]int32{"b": {3, 1}, "a": {0}, "c": nil}, 9)
	s, err := consumer.DecodeSubscription(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := consumer.Subscription{Version: 3, Topics: []string{"a", "b"}, Generation: 9, Rack: "r1",
		Owned: []assign.TopicPartitions{{Topic: "a", Partitions: []int32{0}}, {Topic: "b", Partitions: []int32{1, 3}}}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("subscription %+v\nwant %+v", s, want)
	}
	// A member whose subscription is garbage makes balancing fail clearly.
	bad := kmsg.NewJoinGroupResponseMember()
	bad.MemberID = "m1"
	bad.ProtocolMetadata = []byte{0, 0, 0xff}
	if _, _, err := b.MemberBalancer([]kmsg.JoinGroupResponseMember{bad}); err == nil || !strings.Contains(err.Error(), "m1") {
		t.Errorf("garbage subscription: err = %v", err)
	}
}

// failing is an assignor whose error does not name it.
type failing struct{ assign.Assignor }

func (failing) Name() string { return "failing" }
func (failing) Assign([]assign.Member, map[string]assign.Topic) (map[string]assign.Assignment, error) {
	return nil, fmt.Errorf("no plan")
}

// TestAssignErrorNamesTheAssignorOnce: the leader's error names the
// assignor once, whether or not the assignor's own error starts with its
// name (cohort's do), and keeps what the assignor said.
func TestAssignErrorNamesTheAssignorOnce(t *testing.T) {
	meta, err := consumer.Subscription{Version: consumer.MaxVersion, Topics: []string{"orders", "payments"}, Generation: -1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		a    assign.Assignor
		want string
	}{
		{assign.Copartition([]string{"orders", "payments"}),
			"kgobalancer: copartition: co-partitioned topics have different partition counts: orders=6 payments=4; give them the same partition count, or put them in separate co-partitioned sets"},
		{failing{assign.Range()}, "kgobalancer: failing: no plan"},
	} {
		mb, _, err := kgobalancer.New(tc.a).MemberBalancer([]kmsg.JoinGroupResponseMember{{MemberID: "m1", ProtocolMetadata: meta}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"orders": 6, "payments": 4})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.a.Name(), err, tc.want)
		}
	}
}
