package consumer_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clients/testbed"
	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
	"github.com/cohort-dev/cohort/consumer/kgobalancer"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/member"
	"github.com/cohort-dev/cohort/member/membertest"
)

// The mixed-group tests put four kinds of consumer in one group, all
// announcing the same protocol name:
//
//   - "kgo+cohort": franz-go with cohort's assignor through kgobalancer;
//   - "kgo": plain franz-go with its own balancer of that name;
//   - "sarama": sarama with its own strategy of that name;
//   - "group": cohort's consumer.Group with cohort's assignor.
//
// Whoever leads, every member must end up with exactly what cohort's
// assignor computes for the final group. Ownership is observed through the
// clients' group callbacks, never through consumption (cohort serves no
// records).

var mixTopics = []string{"alpha", "beta"}

// The session and rebalance timeouts leave room for a loaded machine (CI
// runs every package at once on two cores): a member that cannot rejoin
// within the rebalance timeout, or heartbeat within the session, is removed
// and its partitions go to others before it learns of it, as in Kafka. The
// ledger, which follows the clients' callbacks, would read that as a double
// owner. With 5 s, one CI run saw it once (a 6 s subtest, sarama still
// holding alpha/4 when cohort's member was given it); passing runs do not
// wait on these timeouts.
const (
	mixPartitions = 5
	mixSession    = 15 * time.Second
	mixRebalance  = 15 * time.Second
	mixHeartbeat  = 100 * time.Millisecond
)

func init() { sarama.Logger = log.New(io.Discard, "", 0) }

// mixProtocol is one protocol name and each client's implementation of it.
type mixProtocol struct {
	name   string
	cohort func() assign.Assignor
	kgo    func() kgo.GroupBalancer
	sarama func() sarama.BalanceStrategy
}

var mixProtocols = []mixProtocol{
	{"range", assign.Range, kgo.RangeBalancer, sarama.NewBalanceStrategyRange},
	{"cooperative-sticky", sticky.NewCooperative, kgo.CooperativeStickyBalancer, sarama.NewBalanceStrategyCooperativeSticky},
	{"sticky", sticky.New, kgo.StickyBalancer, sarama.NewBalanceStrategySticky},
}

// ledger records which member holds each partition, from the members'
// callbacks, and keeps the first moment two members held one at once.
type ledger struct {
	mu        sync.Mutex
	holder    map[string]string // "topic/partition" -> member name
	violation string
}

func newLedger() *ledger { return &ledger{holder: map[string]string{}} }

func (l *ledger) take(name string, tps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range tps {
		for _, p := range ps {
			k := fmt.Sprintf("%s/%d", t, p)
			if cur, ok := l.holder[k]; ok && cur != name && l.violation == "" {
				l.violation = fmt.Sprintf("%s assigned to %s while %s holds it", k, name, cur)
			}
			l.holder[k] = name
		}
	}
}

func (l *ledger) release(name string, tps map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range tps {
		for _, p := range ps {
			k := fmt.Sprintf("%s/%d", t, p)
			if l.holder[k] == name {
				delete(l.holder, k)
			}
		}
	}
}

func (l *ledger) err() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.violation
}

// mixMember is one member of any kind, as the checks see it.
type mixMember struct {
	name string
	// state is the member's id, generation and held partitions (sorted).
	state func() (id string, gen int32, own map[string][]int32)
	// led is the largest group this member's assignor was asked to assign
	// (it runs on the leader only).
	led func() int
}

// holding folds a member's callbacks into its current partitions and keeps
// the ledger informed.
type holding struct {
	name string
	l    *ledger
	mu   sync.Mutex
	own  map[string][]int32
}

func newHolding(name string, l *ledger) *holding {
	return &holding{name: name, l: l, own: map[string][]int32{}}
}

func (h *holding) add(tps map[string][]int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.l.take(h.name, tps)
	for t, ps := range tps {
		for _, p := range ps {
			if !slices.Contains(h.own[t], p) {
				h.own[t] = append(h.own[t], p)
			}
		}
		slices.Sort(h.own[t])
	}
}

func (h *holding) remove(tps map[string][]int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.l.release(h.name, tps)
	for t, ps := range tps {
		h.own[t] = slices.DeleteFunc(h.own[t], func(p int32) bool { return slices.Contains(ps, p) })
		if len(h.own[t]) == 0 {
			delete(h.own, t)
		}
	}
}

// set replaces the holding by a full assignment.
func (h *holding) set(tps map[string][]int32) {
	h.mu.Lock()
	cur := maps.Clone(h.own)
	h.mu.Unlock()
	gone, added := map[string][]int32{}, map[string][]int32{}
	for t, ps := range cur {
		for _, p := range ps {
			if !slices.Contains(tps[t], p) {
				gone[t] = append(gone[t], p)
			}
		}
	}
	for t, ps := range tps {
		for _, p := range ps {
			if !slices.Contains(cur[t], p) {
				added[t] = append(added[t], p)
			}
		}
	}
	h.remove(gone)
	h.add(added)
}

func (h *holding) get() map[string][]int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]int32{}
	for t, ps := range h.own {
		out[t] = slices.Clone(ps)
	}
	return out
}

// assignSpy records the largest group a cohort assignor assigned.
type assignSpy struct {
	assign.Assignor
	mu  sync.Mutex
	max int
}

func (s *assignSpy) Assign(ms []assign.Member, md map[string]assign.Topic) (map[string]assign.Assignment, error) {
	s.note(len(ms))
	return s.Assignor.Assign(ms, md)
}

func (s *assignSpy) note(n int) {
	s.mu.Lock()
	s.max = max(s.max, n)
	s.mu.Unlock()
}

func (s *assignSpy) largest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// kgoSpy records the largest group a franz-go balancer balanced; franz-go
// calls MemberBalancer on the leader only.
type kgoSpy struct {
	kgo.GroupBalancer
	s assignSpy
}

func (k *kgoSpy) MemberBalancer(ms []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	k.s.note(len(ms))
	return k.GroupBalancer.MemberBalancer(ms)
}

// saramaSpy records the largest group a sarama strategy planned (leader
// only) and reports every assignment this member receives. It forwards
// sarama's optional strategy interfaces to the strategy it wraps.
type saramaSpy struct {
	sarama.BalanceStrategy
	s        assignSpy
	assigned func(tps map[string][]int32, gen int32)
}

var (
	_ sarama.RebalanceProtocolBalanceStrategy    = (*saramaSpy)(nil)
	_ sarama.SubscriptionUserDataBalanceStrategy = (*saramaSpy)(nil)
	_ sarama.OnAssignmentBalanceStrategy         = (*saramaSpy)(nil)
)

func (s *saramaSpy) Plan(ms map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	s.s.note(len(ms))
	return s.BalanceStrategy.Plan(ms, topics)
}

func (s *saramaSpy) SupportedProtocols() []sarama.RebalanceProtocol {
	if r, ok := s.BalanceStrategy.(sarama.RebalanceProtocolBalanceStrategy); ok {
		return r.SupportedProtocols()
	}
	return []sarama.RebalanceProtocol{sarama.RebalanceProtocolEager}
}

func (s *saramaSpy) SubscriptionUserData(topics []string) ([]byte, error) {
	if u, ok := s.BalanceStrategy.(sarama.SubscriptionUserDataBalanceStrategy); ok {
		return u.SubscriptionUserData(topics)
	}
	return nil, nil // what sarama sends without the hook (no static user data configured)
}

func (s *saramaSpy) OnAssignment(a *sarama.ConsumerGroupMemberAssignment, gen int32) {
	if o, ok := s.BalanceStrategy.(sarama.OnAssignmentBalanceStrategy); ok {
		o.OnAssignment(a, gen)
	}
	tps := map[string][]int32{}
	if a != nil {
		for t, ps := range a.Topics {
			if len(ps) > 0 {
				tps[t] = slices.Clone(ps)
			}
		}
	}
	s.assigned(tps, gen)
}

// startMixKgo runs a franz-go member with balancer b (which is wrapped in a
// spy unless it is cohort's adapter around spy).
func startMixKgo(t *testing.T, addr, group, name string, l *ledger, b kgo.GroupBalancer, led func() int) *mixMember {
	t.Helper()
	h := newHolding(name, l)
	var mu sync.Mutex
	var id string
	gen := int32(-1)
	note := func(cl *kgo.Client) {
		i, g := cl.GroupMetadata()
		mu.Lock()
		id, gen = i, g
		mu.Unlock()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(mixTopics...),
		kgo.Balancers(b),
		kgo.SessionTimeout(mixSession),
		kgo.RebalanceTimeout(mixRebalance),
		kgo.HeartbeatInterval(mixHeartbeat),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, tps map[string][]int32) { h.add(tps); note(cl) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, tps map[string][]int32) { h.remove(tps); note(cl) }),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, tps map[string][]int32) { h.remove(tps); note(cl) }),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx) // drives the group; against cohort fetches fail, which is fine
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return &mixMember{
		name: name,
		state: func() (string, int32, map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			return id, gen, h.get()
		},
		led: led,
	}
}

// mixSarama is a sarama handler that remembers its session (for the member
// id) and releases everything when a session ends.
type mixSarama struct {
	h    *holding
	mu   sync.Mutex
	sess sarama.ConsumerGroupSession
}

func (m *mixSarama) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.sess = s
	m.mu.Unlock()
	return nil
}

func (m *mixSarama) Cleanup(sarama.ConsumerGroupSession) error {
	m.h.remove(m.h.get())
	return nil
}

func (m *mixSarama) ConsumeClaim(_ sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for range c.Messages() {
	}
	return nil
}

// startMixSarama runs a sarama member. Its holding follows the assignment
// sarama reports to the strategy after every SyncGroup (OnAssignment) and
// is emptied when an eager session ends (Cleanup). Under the cooperative
// protocol a revoked partition thus leaves the ledger when the member learns
// of the revocation, a little before sarama has stopped its claim; the
// partition's next owner only gets it in the follow-up rebalance, which
// waits for this member's rejoin, after the claim stopped.
func startMixSarama(t *testing.T, addr, group, name string, l *ledger, strategy sarama.BalanceStrategy) *mixMember {
	t.Helper()
	m := &mixSarama{h: newHolding(name, l)}
	var mu sync.Mutex
	gen := int32(-1)
	spy := &saramaSpy{BalanceStrategy: strategy}
	spy.assigned = func(tps map[string][]int32, g int32) {
		m.h.set(tps)
		mu.Lock()
		gen = g
		mu.Unlock()
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_2_0_0 // subscription v2: owned partitions and generation
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{spy}
	cfg.Consumer.Group.Session.Timeout = mixSession
	cfg.Consumer.Group.Rebalance.Timeout = mixRebalance
	cfg.Consumer.Group.Heartbeat.Interval = mixHeartbeat
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.RefreshFrequency = 0
	g, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, mixTopics, m); err != nil && ctx.Err() == nil {
				t.Logf("%s: consume: %v", name, err)
				select { // retry pacing, ended with the test
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; g.Close() })
	return &mixMember{
		name: name,
		state: func() (string, int32, map[string][]int32) {
			m.mu.Lock()
			s := m.sess
			m.mu.Unlock()
			id := ""
			if s != nil {
				id = s.MemberID()
			}
			mu.Lock()
			defer mu.Unlock()
			return id, gen, m.h.get()
		},
		led: spy.s.largest,
	}
}

func startMixGroup(t *testing.T, addr, group, name string, l *ledger, a assign.Assignor) *mixMember {
	t.Helper()
	h := newHolding(name, l)
	conv := func(tps []assign.TopicPartitions) map[string][]int32 {
		out := map[string][]int32{}
		for _, tp := range tps {
			out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
		}
		return out
	}
	spy := &assignSpy{Assignor: a}
	g, err := consumer.StartGroup(consumer.GroupConfig{
		Member: member.Config{
			Group: group, SessionTimeout: mixSession, RebalanceTimeout: mixRebalance, HeartbeatInterval: mixHeartbeat,
			Logger: membertest.Logger(t).With("consumer", name),
		},
		Client:    membertest.Client(t, addr),
		Topics:    mixTopics,
		Assignors: []assign.Assignor{spy},
		Assigned:  func(_ context.Context, _ member.Generation, added []assign.TopicPartitions) { h.add(conv(added)) },
		Revoked:   func(tps []assign.TopicPartitions) { h.remove(conv(tps)) },
		Lost:      func(tps []assign.TopicPartitions) { h.remove(conv(tps)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Close(ctx)
	})
	return &mixMember{
		name: name,
		state: func() (string, int32, map[string][]int32) {
			gen, _ := g.Generation()
			return gen.MemberID, gen.ID, h.get()
		},
		led: spy.largest,
	}
}

// mixKinds are the four member kinds; start runs one in the group.
var mixKinds = []struct {
	name  string
	start func(t *testing.T, addrs [2]string, group string, l *ledger, p mixProtocol) *mixMember
}{
	{"kgo+cohort", func(t *testing.T, addrs [2]string, group string, l *ledger, p mixProtocol) *mixMember {
		spy := &assignSpy{Assignor: p.cohort()}
		return startMixKgo(t, addrs[0], group, "kgo+cohort", l, kgobalancer.New(spy), spy.largest)
	}},
	{"kgo", func(t *testing.T, addrs [2]string, group string, l *ledger, p mixProtocol) *mixMember {
		spy := &kgoSpy{GroupBalancer: p.kgo()}
		return startMixKgo(t, addrs[0], group, "kgo", l, spy, spy.s.largest)
	}},
	{"sarama", func(t *testing.T, addrs [2]string, group string, l *ledger, p mixProtocol) *mixMember {
		return startMixSarama(t, addrs[1], group, "sarama", l, p.sarama())
	}},
	{"group", func(t *testing.T, addrs [2]string, group string, l *ledger, p mixProtocol) *mixMember {
		return startMixGroup(t, addrs[0], group, "group", l, p.cohort())
	}},
}

// mixBackend is a coordinator holding mixTopics: addr is where members
// connect, saramaAddr where sarama members do.
type mixBackend struct {
	name  string
	start func(t *testing.T) (addr, saramaAddr string)
}

// Against cohort, sarama members reach the same cohort node through the
// test bed's router, which adds a data plane (kfake): sarama starts a
// partition consumer for every claim (ListOffsets first), cohort serves no
// ListOffsets, and sarama ends its session when a claim cannot start, so a
// sarama member holding partitions rejoins forever against cohort alone.
// The other kinds talk to the cohort node directly.
var mixBackends = []mixBackend{
	{"cohort", func(t *testing.T) (string, string) {
		n := membertest.StartCohort(t, nil)
		for _, tp := range mixTopics {
			if _, err := n.Catalog().Create(tp, mixPartitions, nil); err != nil {
				t.Fatal(err)
			}
		}
		data := membertest.StartKfake(t, kfake.SeedTopics(mixPartitions, mixTopics...))
		r, err := testbed.NewRouter(data, n.Addr(), 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return n.Addr(), r.Addr()
	}},
	{"kfake", func(t *testing.T) (string, string) {
		addr := membertest.StartKfake(t, kfake.SeedTopics(mixPartitions, mixTopics...))
		return addr, addr
	}},
}

// mixCheck reports whether the members agree on a generation and each holds
// exactly what cohort's assignor computes for them, plus a description.
func mixCheck(a assign.Assignor, ms []*mixMember) (bool, string) {
	var sb strings.Builder
	gens := map[int32]bool{}
	owns := map[string]map[string][]int32{}
	var group []assign.Member
	ok := true
	for _, m := range ms {
		id, gen, own := m.state()
		fmt.Fprintf(&sb, "  %-10s id=%q gen=%d own=%v\n", m.name, id, gen, own)
		if id == "" || owns[id] != nil {
			ok = false
			continue
		}
		gens[gen] = true
		owns[id] = own
		// Each member as it would announce itself now: what it holds, in
		// its generation (only the sticky assignors read this).
		mem := assign.Member{ID: id, Topics: mixTopics, Generation: gen}
		for _, t := range slices.Sorted(maps.Keys(own)) {
			mem.Owned = append(mem.Owned, assign.TopicPartitions{Topic: t, Partitions: own[t]})
		}
		group = append(group, mem)
	}
	if !ok || len(gens) != 1 {
		return false, sb.String()
	}
	sort.Slice(group, func(i, j int) bool { return group[i].ID < group[j].ID })
	md := map[string]assign.Topic{}
	for _, tp := range mixTopics {
		md[tp] = assign.Topic{Name: tp, Partitions: mixPartitions}
	}
	want, err := a.Assign(group, md)
	if err != nil {
		return false, sb.String() + "  assignor: " + err.Error() + "\n"
	}
	for id, own := range owns {
		exp := map[string][]int32{}
		for _, tp := range want[id].Partitions {
			exp[tp.Topic] = slices.Sorted(slices.Values(tp.Partitions))
		}
		if !reflect.DeepEqual(exp, own) {
			fmt.Fprintf(&sb, "  cohort's %s wants for %s: %v\n", a.Name(), id, exp)
			ok = false
		}
	}
	return ok, sb.String()
}

// mixWait waits (bounded) until mixCheck holds, failing on a double owner.
func mixWait(t *testing.T, l *ledger, a assign.Assignor, ms []*mixMember, within time.Duration) {
	t.Helper()
	var last string
	if testwait.Until(within, func() bool {
		if v := l.err(); v != "" {
			t.Fatal(v)
		}
		ok, state := mixCheck(a, ms)
		last = state
		return ok
	}) {
		return
	}
	t.Fatalf("no convergence within %v; last state:\n%s", within, last)
}

// mixVerify checks the converged state independently of the assignor: every
// partition held by exactly one member, counts balanced (per topic for
// range, overall for the sticky assignors), and the ledger agrees.
func mixVerify(t *testing.T, l *ledger, protocol string, ms []*mixMember) {
	t.Helper()
	holders := map[string]string{}
	total := map[string]int{}
	perTopic := map[string]map[string]int{}
	for _, m := range ms {
		_, _, own := m.state()
		for tp, ps := range own {
			for _, p := range ps {
				k := fmt.Sprintf("%s/%d", tp, p)
				if h, dup := holders[k]; dup {
					t.Fatalf("%s held by %s and %s", k, h, m.name)
				}
				holders[k] = m.name
				total[m.name]++
				if perTopic[tp] == nil {
					perTopic[tp] = map[string]int{}
				}
				perTopic[tp][m.name]++
			}
		}
	}
	if len(holders) != len(mixTopics)*mixPartitions {
		t.Fatalf("%d of %d partitions held: %v", len(holders), len(mixTopics)*mixPartitions, holders)
	}
	spread := func(counts map[string]int) int {
		lo, hi := len(mixTopics)*mixPartitions, 0
		for _, m := range ms {
			lo, hi = min(lo, counts[m.name]), max(hi, counts[m.name])
		}
		return hi - lo
	}
	if protocol == "range" {
		for tp, c := range perTopic {
			if d := spread(c); d > 1 {
				t.Fatalf("range: topic %s counts %v differ by %d", tp, c, d)
			}
		}
	} else if d := spread(total); d > 1 {
		t.Fatalf("%s: counts %v differ by %d", protocol, total, d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !maps.Equal(l.holder, holders) {
		t.Fatalf("callbacks say %v, members say %v", l.holder, holders)
	}
	if l.violation != "" {
		t.Fatal(l.violation)
	}
}

// TestMixedGroupsConverge runs, against cohort and against kfake, a group
// of the four member kinds on range, then cooperative-sticky, then sticky;
// each kind joins first (and so leads) once per protocol. The first member
// converges alone, then the three others join.
func TestMixedGroupsConverge(t *testing.T) {
	testwait.WallClock(t, "franz-go, sarama and cohort's own members converging against live coordinators")
	for _, be := range mixBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel() // the runs mostly wait on timers
			for _, p := range mixProtocols {
				t.Run(p.name, func(t *testing.T) {
					for first := range mixKinds {
						t.Run("leader="+mixKinds[first].name, func(t *testing.T) {
							addr, saramaAddr := be.start(t)
							mixRun(t, [2]string{addr, saramaAddr}, p, first)
						})
					}
				})
			}
		})
	}
}

func mixRun(t *testing.T, addrs [2]string, p mixProtocol, first int) {
	l := newLedger()
	group := "mixed-" + p.name
	leader := mixKinds[first].start(t, addrs, group, l, p)
	ms := []*mixMember{leader}
	mixWait(t, l, p.cohort(), ms, 30*time.Second)
	// The others join one at a time; after each join the group converges
	// again. Stickiness: with a sticky protocol the fewest partitions that
	// balance requires change owner (the newcomer's share, total/members).
	// That is asserted where the deciding assignor sees every member's
	// ownership: cohort's cooperative-sticky. Elsewhere the moves are
	// logged: other implementations may move more, and under eager sticky
	// franz-go members announce no previous assignment (franz-go hands
	// balancers an empty one after an eager revocation).
	prev := mixHolders(ms)
	cohortLeads := leader.name == "group" || leader.name == "kgo+cohort"
	for i, k := range mixKinds {
		if i == first {
			continue
		}
		ms = append(ms, k.start(t, addrs, group, l, p))
		mixWait(t, l, p.cohort(), ms, 45*time.Second)
		cur := mixHolders(ms)
		moved := 0
		for tp, h := range prev {
			if cur[tp] != h {
				moved++
			}
		}
		minimal := len(mixTopics) * mixPartitions / len(ms)
		switch {
		case p.name == "range":
		case moved != minimal && p.cohort().Cooperative() && cohortLeads:
			t.Errorf("%s joining: %d partitions moved, balance needs %d", k.name, moved, minimal)
		default:
			t.Logf("%s joining: %d partitions moved, balance needs %d", k.name, moved, minimal)
		}
		prev = cur
	}
	gen := mixHold(t, l, p.cohort(), ms)
	mixVerify(t, l, p.name, ms)
	// A bounded number of rebalances. A join takes one, plus a follow-up
	// under a cooperative protocol, and members that revoke at slightly
	// different times may cause one more; a member rejoining in a loop
	// (as sarama does against cohort without a data plane) goes far
	// beyond.
	if bound := int32(1 + 3*(len(ms)-1)); gen > bound {
		t.Errorf("converged in generation %d, more rebalances than joins explain (bound %d)", gen, bound)
	}
	// Evidence of who led: the first member's assignor assigned the whole
	// group, and no other member's did.
	for _, m := range ms {
		if n := m.led(); (m == leader) != (n == len(ms)) {
			t.Errorf("%s assigned a group of at most %d of %d members; %s joined first", m.name, n, len(ms), leader.name)
		}
	}
	_, state := mixCheck(p.cohort(), ms)
	t.Logf("converged:\n%s", state)
}

// mixHolders maps "topic/partition" to the member holding it.
func mixHolders(ms []*mixMember) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		_, _, own := m.state()
		for tp, ps := range own {
			for _, p := range ps {
				out[fmt.Sprintf("%s/%d", tp, p)] = m.name
			}
		}
	}
	return out
}

// mixHold checks that the converged state holds, in one generation, for a
// window of many heartbeat intervals, and returns that generation.
func mixHold(t *testing.T, l *ledger, a assign.Assignor, ms []*mixMember) int32 {
	t.Helper()
	_, gen, _ := ms[0].state()
	// An observation window (the behaviour under test): the state is
	// checked every 25ms for eight heartbeat intervals.
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(8 * mixHeartbeat); time.Now().Before(end); <-tick.C {
		ok, state := mixCheck(a, ms)
		_, g, _ := ms[0].state()
		if !ok || g != gen {
			t.Fatalf("converged state did not hold (generation %d, then):\n%s", gen, state)
		}
		if v := l.err(); v != "" {
			t.Fatal(v)
		}
	}
	return gen
}
