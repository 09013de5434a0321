package saramabalancer_test

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"

	"github.com/IBM/sarama"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/assign/sticky"
	"github.com/cohort-dev/cohort/consumer/internal/churn"
	"github.com/cohort-dev/cohort/consumer/saramabalancer"
)

// The leader-path benchmark measures what a sarama group leader pays to
// balance, the way sarama's consumer group drives a BalanceStrategy:
// JoinGroupResponse.GetMembers (sarama decodes every subscription), Plan
// over the topics' partitions, then AssignmentData and the encoding of
// every member's assignment into the SyncGroup request (members the plan
// leaves out get an empty one). cohort's assignors (through saramabalancer)
// and sarama's own strategies run on the same group, each member's
// subscription built as that strategy's client would send it (subscription
// version 2, Kafka 3.2+). The groups are churn.Build's: a scattered previous
// plan and one member gone. Sizes are small enough for sarama's sticky
// strategy, whose time grows much faster than linearly.

const saramaGeneration = 41

type saramaScenario struct {
	name                      string
	ntopics, nparts, nmembers int
}

var saramaScenarios = []saramaScenario{
	{"2k-x-100/leave", 20, 100, 100},
	{"10k-x-200/leave", 50, 200, 200},
}

// saramaStrategy is one strategy compared. cooperative members announce
// what they own; eager ones only user data (sarama's eager sticky echoes
// the user data the leader put in its last assignment, saramabalancer's
// builds it from the assignment in OnAssignment).
type saramaStrategy struct {
	name        string
	new         func() sarama.BalanceStrategy
	cooperative bool
}

var saramaStrategies = []saramaStrategy{
	{"cohort-sticky", func() sarama.BalanceStrategy { return saramabalancer.New(sticky.New()) }, false},
	{"sarama-sticky", sarama.NewBalanceStrategySticky, false},
	{"cohort-cooperative-sticky", func() sarama.BalanceStrategy { return saramabalancer.New(sticky.NewCooperative()) }, true},
	{"sarama-cooperative-sticky", sarama.NewBalanceStrategyCooperativeSticky, true},
	{"cohort-range", func() sarama.BalanceStrategy { return saramabalancer.New(assign.Range()) }, false},
	{"sarama-range", sarama.NewBalanceStrategyRange, false},
	{"cohort-roundrobin", func() sarama.BalanceStrategy { return saramabalancer.New(assign.RoundRobin()) }, false},
	{"sarama-roundrobin", sarama.NewBalanceStrategyRoundRobin, false},
}

// joinResponse is the JoinGroup response the leader receives.
func joinResponse(tb testing.TB, g *churn.Group, st saramaStrategy) *sarama.JoinGroupResponse {
	resp := &sarama.JoinGroupResponse{}
	for _, id := range g.IDs {
		s := st.new()
		prev := g.Prev[id]
		meta := &sarama.ConsumerGroupMemberMetadata{Version: 2, Topics: g.Subs[id], GenerationID: saramaGeneration}
		// The member's last SyncGroup: the leader's user data for it, and
		// the strategy told of the assignment.
		ud, err := s.AssignmentData(id, prev, saramaGeneration)
		if err != nil {
			tb.Fatal(err)
		}
		meta.UserData = ud
		if oa, ok := s.(sarama.OnAssignmentBalanceStrategy); ok {
			oa.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: prev, UserData: ud}, saramaGeneration)
		}
		if su, ok := s.(sarama.SubscriptionUserDataBalanceStrategy); ok {
			if meta.UserData, err = su.SubscriptionUserData(g.Subs[id]); err != nil {
				tb.Fatal(err)
			}
		}
		if st.cooperative {
			for _, t := range slices.Sorted(maps.Keys(prev)) {
				meta.OwnedPartitions = append(meta.OwnedPartitions, &sarama.OwnedPartition{Topic: t, Partitions: prev[t]})
			}
		}
		req := &sarama.JoinGroupRequest{}
		if err := req.AddGroupProtocolMetadata(s.Name(), meta); err != nil {
			tb.Fatal(err)
		}
		resp.Members = append(resp.Members, sarama.GroupMember{MemberId: id, Metadata: req.OrderedGroupProtocols[0].Metadata})
	}
	return resp
}

// saramaLeader is the timed path. parts holds each topic's partition ids,
// as sarama's client returns them.
func saramaLeader(s sarama.BalanceStrategy, resp *sarama.JoinGroupResponse, parts map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	members, err := resp.GetMembers()
	if err != nil {
		return nil, err
	}
	topics := make(map[string][]int32)
	for _, m := range members {
		for _, t := range m.Topics {
			topics[t] = parts[t]
		}
	}
	plan, err := s.Plan(members, topics)
	if err != nil {
		return nil, err
	}
	req := &sarama.SyncGroupRequest{Version: 5}
	for id, tps := range plan {
		ud, err := s.AssignmentData(id, tps, saramaGeneration+1)
		if err != nil {
			return nil, err
		}
		if err := req.AddGroupAssignmentMember(id, &sarama.ConsumerGroupMemberAssignment{Topics: tps, UserData: ud}); err != nil {
			return nil, err
		}
		delete(members, id)
	}
	for id := range members {
		if err := req.AddGroupAssignmentMember(id, &sarama.ConsumerGroupMemberAssignment{}); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// BenchmarkSaramaLeaderPath: see the comment at the top of the file.
// Metrics as in kgobalancer's BenchmarkLeaderPath.
func BenchmarkSaramaLeaderPath(b *testing.B) {
	if testing.Short() {
		b.Skip("skipped in -short mode")
	}
	for _, sc := range saramaScenarios {
		b.Run(sc.name, func(b *testing.B) {
			g := churn.Build(sc.ntopics, sc.nparts, sc.nmembers, false)
			parts := map[string][]int32{}
			for t, n := range g.Counts {
				for p := int32(0); p < n; p++ {
					parts[t] = append(parts[t], p)
				}
			}
			for _, st := range saramaStrategies {
				b.Run(st.name, func(b *testing.B) {
					resp := joinResponse(b, g, st)
					s := st.new()
					// One untimed run first (see kgobalancer's
					// BenchmarkLeaderPath).
					plan, err := saramaLeader(s, resp, parts)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if plan, err = saramaLeader(s, resp, parts); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					spread, moved, unassigned := g.Quality(plan)
					b.ReportMetric(float64(spread), "spread")
					b.ReportMetric(float64(moved), "moved")
					b.ReportMetric(float64(unassigned), "unassigned")
				})
			}
		})
	}
}

// TestSaramaLeaderPathInputs checks, on a tiny group, that the benchmark's
// path works for every strategy and that cohort's sticky plan keeps every
// previously owned partition of the remaining members, balanced.
func TestSaramaLeaderPathInputs(t *testing.T) {
	g := churn.Build(4, 10, 6, false)
	parts := map[string][]int32{}
	for tn, n := range g.Counts {
		for p := int32(0); p < n; p++ {
			parts[tn] = append(parts[tn], p)
		}
	}
	for _, st := range saramaStrategies {
		plan, err := saramaLeader(st.new(), joinResponse(t, g, st), parts)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		spread, moved, unassigned := g.Quality(plan)
		t.Log(st.name, fmt.Sprintf("spread %d moved %d unassigned %d", spread, moved, unassigned))
		if st.name == "cohort-sticky" && (spread > 1 || moved != 0 || unassigned != 0) {
			t.Errorf("%s: spread %d moved %d unassigned %d, want <=1, 0, 0", st.name, spread, moved, unassigned)
		}
	}
}
