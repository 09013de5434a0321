package saramabalancer_test

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
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/saramabalancer"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/twmb/franz-go/pkg/kfake"
)

func init() { sarama.Logger = log.New(io.Discard, "", 0) }

var topics = []string{"alpha", "beta"}

const partitions = 4

type member struct {
	mu  sync.Mutex
	id  string
	gen int32
	own map[string][]int32
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.id, m.gen, m.own = s.MemberID(), s.GenerationID(), map[string][]int32{}
	for t, ps := range s.Claims() {
		if len(ps) > 0 {
			m.own[t] = slices.Sorted(slices.Values(ps))
		}
	}
	return nil
}
func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, _ sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}

func (m *member) get() (string, int32, map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, m.gen, maps.Clone(m.own)
}

func start(t *testing.T, addrs []string, group string, s sarama.BalanceStrategy) *member {
	t.Helper()
	m := &member{}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_2_0_0 // subscription v2: owned partitions and generation
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{s}
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = 5 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup(addrs, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, topics, m); err != nil && ctx.Err() == nil {
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

func TestThreeSaramaMembersConvergeOnAssignor(t *testing.T) {
	testwait.WallClock(t, "sarama members against a live coordinator")
	for _, a := range []assign.Assignor{assign.RoundRobin(), assign.Copartition(topics), assign.Redundant(2, nil)} {
		t.Run(a.Name(), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, addr := range c.ListenAddrs() {
				if !strings.HasPrefix(addr, "127.0.0.1:") {
					t.Fatalf("kfake listens on %s", addr)
				}
			}
			var ms []*member
			for i := 0; i < 3; i++ {
				ms = append(ms, start(t, c.ListenAddrs(), "g-"+a.Name(), saramabalancer.New(a)))
			}
			md := map[string]assign.Topic{}
			for _, tp := range topics {
				md[tp] = assign.Topic{Name: tp, Partitions: partitions}
			}
			var last string
			if !testwait.Until(30*time.Second, func() bool {
				ok, state := check(a, ms, md)
				last = state
				return ok
			}) {
				t.Fatalf("no convergence; last state:\n%s", last)
			}
		})
	}
}

func check(a assign.Assignor, ms []*member, md map[string]assign.Topic) (bool, string) {
	var sb strings.Builder
	var group []assign.Member
	gens := map[int32]bool{}
	owns := map[string]map[string][]int32{}
	for _, m := range ms {
		id, gen, own := m.get()
		fmt.Fprintf(&sb, "  id=%q gen=%d own=%v\n", id, gen, own)
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
			return false, sb.String()
		}
	}
	return true, sb.String()
}

// echo is a test assignor with user data in both directions.
type echo struct {
	assign.Assignor
	coop bool
}

func (e echo) Cooperative() bool { return e.coop }
func (echo) UserData(owned []assign.TopicPartitions, gen int32) []byte {
	return fmt.Appendf(nil, "%v@%d", owned, gen)
}
func (e echo) Assign(ms []assign.Member, md map[string]assign.Topic) (map[string]assign.Assignment, error) {
	res, err := e.Assignor.Assign(ms, md)
	for id, a := range res {
		a.UserData = []byte("for " + id)
		res[id] = a
	}
	return res, err
}

func TestProtocolsAndUserData(t *testing.T) {
	if p := saramabalancer.New(assign.Range()).SupportedProtocols(); !reflect.DeepEqual(p, []sarama.RebalanceProtocol{sarama.RebalanceProtocolEager}) {
		t.Errorf("range protocols %v", p)
	}
	s := saramabalancer.New(echo{assign.RoundRobin(), true})
	if p := s.SupportedProtocols(); !slices.Contains(p, sarama.RebalanceProtocolCooperative) {
		t.Errorf("cooperative assignor protocols %v", p)
	}
	plan, err := s.Plan(map[string]sarama.ConsumerGroupMemberMetadata{
		"b": {Version: 1, Topics: []string{"t"}},
		"a": {Version: 2, Topics: []string{"t"}, GenerationID: 3},
	}, map[string][]int32{"t": {0, 1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plan["a"]["t"], []int32{0, 2}) || !reflect.DeepEqual(plan["b"]["t"], []int32{1}) {
		t.Errorf("plan %v", plan)
	}
	if ud, _ := s.AssignmentData("b", nil, 4); string(ud) != "for b" {
		t.Errorf("assignment user data %q", ud)
	}
	s.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: map[string][]int32{"t": {2, 0}}}, 4)
	if ud, _ := s.SubscriptionUserData([]string{"t"}); string(ud) != "[{t [0 2]}]@4" {
		t.Errorf("subscription user data %q", ud)
	}
	if _, err := saramabalancer.New(assign.Redundant(0, nil)).Plan(map[string]sarama.ConsumerGroupMemberMetadata{"a": {Topics: []string{"t"}}}, map[string][]int32{"t": {0}}); err == nil {
		t.Error("assignor error not returned")
	}
}

// TestPlanErrorNamesTheAssignorOnce: a failed plan names the assignor once
// (cohort's assignors start their errors with their name).
func TestPlanErrorNamesTheAssignorOnce(t *testing.T) {
	s := saramabalancer.New(assign.Copartition([]string{"orders", "payments"}))
	_, err := s.Plan(map[string]sarama.ConsumerGroupMemberMetadata{"m1": {Topics: []string{"orders", "payments"}}},
		map[string][]int32{"orders": {0, 1, 2, 3, 4, 5}, "payments": {0, 1, 2, 3}})
	const want = "saramabalancer: copartition: co-partitioned topics have different partition counts: orders=6 payments=4; give them the same partition count, or put them in separate co-partitioned sets"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}
