// Package saramabalancer lets IBM/sarama consumers use cohort's assignors
// today, against any Kafka-protocol coordinator: New wraps an
// assign.Assignor as a sarama.BalanceStrategy. sarama encodes and decodes the
// consumer protocol itself and does not pass group instance ids to
// strategies, so members reach the assignor with InstanceID "". Its own
// subscriptions carry no rack (it writes versions 0-2), but it decodes the
// version-3 subscriptions of other clients in the group, whose racks reach
// the assignor.
//
// The adapter is generic: a cooperative assignor (Cooperative() true)
// declares sarama's cooperative rebalance protocol (and eager, for rolling
// upgrades), and sarama then runs KIP-429 incremental rebalancing. Producing
// a revoke-first plan is the assignor's job, as in Kafka.
package saramabalancer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/IBM/sarama"
	"github.com/cohort-dev/cohort/consumer/assign"
)

// Strategy is the sarama.BalanceStrategy New returns. It also implements
// sarama's optional RebalanceProtocolBalanceStrategy,
// SubscriptionUserDataBalanceStrategy and OnAssignmentBalanceStrategy. It
// keeps per-member state (this member's assignment and generation), so use
// one Strategy per consumer group client.
type Strategy struct {
	a assign.Assignor

	mu         sync.Mutex
	userData   map[string][]byte // from the last Plan, per member
	owned      []assign.TopicPartitions
	generation int32
}

var (
	_ sarama.RebalanceProtocolBalanceStrategy    = (*Strategy)(nil)
	_ sarama.SubscriptionUserDataBalanceStrategy = (*Strategy)(nil)
	_ sarama.OnAssignmentBalanceStrategy         = (*Strategy)(nil)
)

// New returns a sarama.BalanceStrategy that announces a.Name() and, when
// this member leads, assigns with a. Put it in
// Config.Consumer.Group.Rebalance.GroupStrategies.
func New(a assign.Assignor) *Strategy { return &Strategy{a: a, generation: -1} }

// Name is the protocol name, a.Name().
func (s *Strategy) Name() string { return s.a.Name() }

// SupportedProtocols maps the assignor's Cooperative flag to sarama's
// rebalance protocols.
func (s *Strategy) SupportedProtocols() []sarama.RebalanceProtocol {
	if s.a.Cooperative() {
		return []sarama.RebalanceProtocol{sarama.RebalanceProtocolCooperative, sarama.RebalanceProtocolEager}
	}
	return []sarama.RebalanceProtocol{sarama.RebalanceProtocolEager}
}

// Plan runs the assignor over sarama's decoded subscriptions.
func (s *Strategy) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	ms := make([]assign.Member, 0, len(members))
	for id, md := range members {
		m := assign.Member{ID: id, Topics: md.Topics, UserData: md.UserData, Generation: md.GenerationID}
		if md.Version < 2 {
			m.Generation = -1
		}
		if md.RackID != nil {
			m.Rack = *md.RackID
		}
		for _, op := range md.OwnedPartitions {
			if op != nil {
				m.Owned = append(m.Owned, assign.TopicPartitions{Topic: op.Topic, Partitions: op.Partitions})
			}
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	md := make(map[string]assign.Topic, len(topics))
	for t, ps := range topics {
		// Partition ids from metadata are 0..n-1; take n from the largest.
		n := int32(0)
		for _, p := range ps {
			n = max(n, p+1)
		}
		md[t] = assign.Topic{Name: t, Partitions: n}
	}
	res, err := s.a.Assign(ms, md)
	if err != nil {
		// cohort's assignors start their errors with their name.
		if name := s.a.Name(); !strings.HasPrefix(err.Error(), name+": ") {
			return nil, fmt.Errorf("saramabalancer: %s: %w", name, err)
		}
		return nil, fmt.Errorf("saramabalancer: %w", err)
	}
	plan := make(sarama.BalanceStrategyPlan, len(res))
	ud := make(map[string][]byte, len(res))
	for id, a := range res {
		if _, ok := members[id]; !ok {
			return nil, fmt.Errorf("saramabalancer: %s assigned to unknown member %q", s.a.Name(), id)
		}
		// What plan.Add builds, without copying the partitions: the
		// assignor's slices are not used again (clipped, so that an
		// append cannot reach a neighbour's).
		var topics map[string][]int32
		for _, tp := range a.Partitions {
			if len(tp.Partitions) == 0 {
				continue
			}
			if topics == nil {
				topics = make(map[string][]int32, len(a.Partitions))
			}
			if have := topics[tp.Topic]; have != nil {
				topics[tp.Topic] = append(have, tp.Partitions...)
			} else {
				topics[tp.Topic] = slices.Clip(tp.Partitions)
			}
		}
		if topics != nil {
			plan[id] = topics
		}
		ud[id] = a.UserData
	}
	s.mu.Lock()
	s.userData = ud
	s.mu.Unlock()
	return plan, nil
}

// AssignmentData returns the user data the last Plan produced for memberID.
func (s *Strategy) AssignmentData(memberID string, _ map[string][]int32, _ int32) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userData[memberID], nil
}

// SubscriptionUserData asks the assignor for this member's subscription user
// data, given the assignment and generation last seen in OnAssignment.
func (s *Strategy) SubscriptionUserData([]string) ([]byte, error) {
	s.mu.Lock()
	owned, gen := s.owned, s.generation
	s.mu.Unlock()
	return s.a.UserData(owned, gen), nil
}

// OnAssignment records this member's assignment for SubscriptionUserData.
func (s *Strategy) OnAssignment(a *sarama.ConsumerGroupMemberAssignment, generationID int32) {
	var owned []assign.TopicPartitions
	if a != nil {
		for t, ps := range a.Topics {
			if len(ps) > 0 {
				owned = append(owned, assign.TopicPartitions{Topic: t, Partitions: slices.Sorted(slices.Values(ps))})
			}
		}
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Topic < owned[j].Topic })
	s.mu.Lock()
	s.owned, s.generation = owned, generationID
	s.mu.Unlock()
}
