// Package kgobalancer lets franz-go consumers use cohort's assignors today,
// against any Kafka-protocol coordinator (a real Kafka cluster or cohort):
// New wraps an assign.Assignor as a kgo.GroupBalancer. The wire format is
// cohort's consumer codec (subscription version 3, which carries owned
// partitions, generation and rack), so members using the adapter share a
// group with plain franz-go, sarama, Java or kafka-go members that announce
// the same protocol name, whichever of them leads.
//
// The adapter is generic: a cooperative assignor (Cooperative() true) is
// announced to kgo as cooperative, and kgo then runs KIP-429 incremental
// rebalancing for it. As in Kafka, producing a revoke-first plan (not handing
// a partition to a new owner while its old owner still lists it) is the
// assignor's job, not the adapter's. An eager assignor (range, roundrobin,
// copartition, sticky) makes kgo revoke every partition of every member at
// each rebalance.
//
// A client takes the balancer among its options, one balancer per client:
//
//	cl, err := kgo.NewClient(
//		kgo.SeedBrokers("127.0.0.1:9092"),
//		kgo.ConsumerGroup("orders"),
//		kgo.ConsumeTopics("orders", "payments"),
//		kgo.Balancers(kgobalancer.New(sticky.NewCooperative())),
//		// or kgobalancer.New(assign.Copartition([]string{"orders", "payments"}))
//	)
//
// examples/kgobalancer in cohort's repository is a complete consumer that
// prints what it is assigned and revoked.
package kgobalancer

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cohort-dev/cohort/consumer"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Option configures the adapter.
type Option func(*balancer)

// WithRack announces the member's rack in its subscription, for rack-aware
// assignors.
func WithRack(rack string) Option { return func(b *balancer) { b.rack = rack } }

// WithLogger sets where the adapter logs problems it cannot return as errors
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(b *balancer) { b.log = l } }

// New returns a kgo.GroupBalancer that announces a.Name() and, when this
// member leads, assigns with a. Pass it to kgo.Balancers. Use one balancer per
// client: it remembers the client's last assignment (see JoinGroupMetadata).
func New(a assign.Assignor, opts ...Option) kgo.GroupBalancer {
	b := &balancer{a: a, log: slog.Default()}
	for _, o := range opts {
		o(b)
	}
	return b
}

type balancer struct {
	a    assign.Assignor
	rack string
	log  *slog.Logger

	mu   sync.Mutex
	last []assign.TopicPartitions // the last assignment received in SyncGroup
}

func (b *balancer) ProtocolName() string { return b.a.Name() }
func (b *balancer) IsCooperative() bool  { return b.a.Cooperative() }

// JoinGroupMetadata encodes this member's subscription. kgo passes what the
// member owns now (empty under the eager protocol, which revokes all before
// joining).
//
// Under the eager protocol kgo forgets the assignment before joining, which
// would make a sticky assignor's user data empty and lose stickiness; the
// adapter remembers the last assignment it parsed and announces that in the
// user data (owned partitions stay empty, as eager members own nothing while
// they rejoin).
func (b *balancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	owned := toTopicPartitions(current)
	prev := owned
	if len(owned) == 0 && !b.a.Cooperative() {
		b.mu.Lock()
		prev = b.last
		b.mu.Unlock()
	}
	s := consumer.Subscription{
		Version:    consumer.MaxVersion,
		Topics:     interests,
		UserData:   b.a.UserData(prev, generation),
		Owned:      owned,
		Generation: generation,
		Rack:       b.rack,
	}
	out, err := s.Encode()
	if err != nil {
		// Only over-long names fail; kgo would reject those topics anyway.
		b.log.Error("kgobalancer: cannot encode subscription", "assignor", b.a.Name(), "err", err)
	}
	return out
}

func (b *balancer) ParseSyncAssignment(raw []byte) (map[string][]int32, error) {
	a, err := consumer.DecodeAssignment(raw)
	if err != nil {
		return nil, err
	}
	m := make(map[string][]int32, len(a.Partitions))
	for _, tp := range a.Partitions {
		m[tp.Topic] = append(m[tp.Topic], tp.Partitions...)
	}
	b.mu.Lock()
	b.last = toTopicPartitions(m)
	b.mu.Unlock()
	return m, nil
}

func (b *balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	mb := &memberBalancer{b: b, version: consumer.MaxVersion, members: make([]assign.Member, 0, len(members))}
	topics := map[string]struct{}{}
	// The decoder reads the metadata in place and gives members with the
	// same topic list the same slice, so each distinct list is added to
	// topics once. The members alias kgo's JoinGroup response (user
	// data), which is not modified while balancing.
	d := consumer.NewMemberDecoder()
	var last []string
	for _, jm := range members {
		inst := ""
		if jm.InstanceID != nil {
			inst = *jm.InstanceID
		}
		m, v, err := d.Member(jm.ProtocolMetadata, jm.MemberID, inst)
		if err != nil {
			return nil, nil, fmt.Errorf("kgobalancer: member %s: %w", jm.MemberID, err)
		}
		mb.members = append(mb.members, m)
		mb.version = min(mb.version, v)
		mb.racks = mb.racks || m.Rack != ""
		if len(m.Topics) > 0 && (len(last) == 0 || &m.Topics[0] != &last[0]) {
			for _, t := range m.Topics {
				topics[t] = struct{}{}
			}
			last = m.Topics
		}
	}
	// The Assignor contract: members sorted by id.
	slices.SortFunc(mb.members, func(x, y assign.Member) int { return strings.Compare(x.ID, y.ID) })
	return mb, topics, nil
}

// maxEncoders bounds the goroutines that encode a large plan.
const maxEncoders = 4

type memberBalancer struct {
	b       *balancer
	members []assign.Member
	version int16 // assignments are written at the lowest subscription version seen
	racks   bool  // some member announced a rack
	info    kgo.BalanceInfo
}

var (
	_ kgo.GroupMemberBalancerOrError = (*memberBalancer)(nil)
	_ kgo.GroupMemberBalancerInfo    = (*memberBalancer)(nil)
)

// SetBalanceInfo receives the cluster metadata kgo has, used for replica
// racks.
func (m *memberBalancer) SetBalanceInfo(info kgo.BalanceInfo) { m.info = info }

// Balance is required by the interface; kgo calls BalanceOrError instead.
func (m *memberBalancer) Balance(topics map[string]int32) kgo.IntoSyncAssignment {
	into, err := m.BalanceOrError(topics)
	if err != nil {
		m.b.log.Error("kgobalancer: assignment failed", "assignor", m.b.a.Name(), "err", err)
		return syncAssignment{}
	}
	return into
}

func (m *memberBalancer) BalanceOrError(counts map[string]int32) (kgo.IntoSyncAssignment, error) {
	topics := make(map[string]assign.Topic, len(counts))
	racks := m.replicaRacks()
	for t, n := range counts {
		topics[t] = assign.Topic{Name: t, Partitions: n, Racks: racks[t]}
	}
	out := make(syncAssignment, len(m.members))
	for i, mem := range m.members {
		out[i] = kmsg.NewSyncGroupRequestGroupAssignment()
		out[i].MemberID = mem.ID
	}
	if s, ok := m.b.a.(assign.Streamer); ok {
		// Encode each member's assignment as the assignor hands it out,
		// without holding the whole plan; a large plan is encoded on a
		// few cores (one writer per goroutine the assignor uses).
		workers := min(runtime.GOMAXPROCS(0), maxEncoders)
		ws := make([]*consumer.AssignmentWriter, workers)
		for i := range ws {
			w, err := consumer.NewAssignmentWriter(m.version)
			if err != nil {
				return nil, fmt.Errorf("kgobalancer: %w", err)
			}
			ws[i] = w
		}
		encErrs := make([]error, workers)
		err := s.AssignEach(m.members, topics, workers, func(w, i int, a assign.Assignment) error {
			out[i].MemberAssignment, encErrs[w] = ws[w].Encode(a)
			return encErrs[w]
		})
		if encErr := errors.Join(encErrs...); encErr != nil {
			return nil, fmt.Errorf("kgobalancer: %w", encErr)
		}
		if err != nil {
			return nil, assignError(m.b.a.Name(), err)
		}
		return out, nil
	}
	res, err := m.b.a.Assign(m.members, topics)
	if err != nil {
		return nil, assignError(m.b.a.Name(), err)
	}
	plan := make([]assign.Assignment, len(m.members))
	for i, mem := range m.members {
		plan[i] = res[mem.ID]
	}
	raw, err := consumer.EncodeAssignments(m.version, plan)
	if err != nil {
		return nil, fmt.Errorf("kgobalancer: %w", err)
	}
	for i := range out {
		out[i].MemberAssignment = raw[i]
	}
	return out, nil
}

// assignError wraps the assignor's error with its name, unless the error
// already starts with it (cohort's assignors name themselves).
func assignError(name string, err error) error {
	if strings.HasPrefix(err.Error(), name+": ") {
		return fmt.Errorf("kgobalancer: %w", err)
	}
	return fmt.Errorf("kgobalancer: %s: %w", name, err)
}

// replicaRacks maps topic -> partition -> racks of its replicas, from the
// metadata kgo cached. Missing data leaves entries empty (racks unknown).
// As kgo does for its own rack-aware balancing (KIP-881), it looks only
// when some member announced a rack and some broker has one; otherwise
// nothing can be placed rack-locally and every topic's Racks stays nil,
// without copying the metadata of every partition.
func (m *memberBalancer) replicaRacks() map[string][][]string {
	if !m.racks || m.info.Topics == nil || m.info.Brokers == nil {
		return nil
	}
	brokers := m.info.Brokers()
	known := false
	for _, bm := range brokers {
		known = known || bm.Rack != nil
	}
	if !known {
		return nil
	}
	out := map[string][][]string{}
	for name, td := range m.info.Topics() {
		var racks [][]string
		for _, p := range td.Partitions {
			if p.Partition < 0 || p.Partition > 1<<20 {
				continue
			}
			for int(p.Partition) >= len(racks) {
				racks = append(racks, nil)
			}
			for _, r := range p.Replicas {
				if bm, ok := brokers[r]; ok && bm.Rack != nil && !slices.Contains(racks[p.Partition], *bm.Rack) {
					racks[p.Partition] = append(racks[p.Partition], *bm.Rack)
				}
			}
		}
		out[name] = racks
	}
	return out
}

type syncAssignment []kmsg.SyncGroupRequestGroupAssignment

func (s syncAssignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment { return s }

func toTopicPartitions(m map[string][]int32) []assign.TopicPartitions {
	var out []assign.TopicPartitions
	for t, ps := range m {
		if len(ps) == 0 {
			continue
		}
		ps = slices.Clone(ps)
		slices.Sort(ps)
		out = append(out, assign.TopicPartitions{Topic: t, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}
