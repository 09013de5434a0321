package kgobalancer_test

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/consumer/kgobalancer"
)

// topicsSpy records the topic metadata the assignor was given.
type topicsSpy struct {
	assign.Assignor
	got map[string]assign.Topic
}

func (s *topicsSpy) Assign(ms []assign.Member, md map[string]assign.Topic) (map[string]assign.Assignment, error) {
	s.got = md
	return s.Assignor.Assign(ms, md)
}

// TestReplicaRacksOnlyWhenUsable checks which replica racks reach the
// assignor: a partition's replica racks when some member announces a rack
// and brokers have racks; nothing (and kgo's topic metadata is not read)
// when no member announces a rack or no broker has one.
func TestReplicaRacksOnlyWhenUsable(t *testing.T) {
	rack := func(s string) *string { return &s }
	withRacks := map[int32]kgo.BrokerMetadata{1: {NodeID: 1, Rack: rack("ra")}, 2: {NodeID: 2, Rack: rack("rb")}}
	noRacks := map[int32]kgo.BrokerMetadata{1: {NodeID: 1}, 2: {NodeID: 2}}
	for _, tc := range []struct {
		name       string
		memberRack string
		brokers    map[int32]kgo.BrokerMetadata
		want       [][]string
	}{
		{"member and broker racks", "ra", withRacks, [][]string{{"ra", "rb"}, {"rb"}}},
		{"no member rack", "", withRacks, nil},
		{"no broker rack", "ra", noRacks, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spy := &topicsSpy{Assignor: assign.Range()}
			var opts []kgobalancer.Option
			if tc.memberRack != "" {
				opts = append(opts, kgobalancer.WithRack(tc.memberRack))
			}
			b := kgobalancer.New(spy, opts...)
			m := kmsg.NewJoinGroupResponseMember()
			m.MemberID = "m1"
			m.ProtocolMetadata = b.JoinGroupMetadata([]string{"t"}, nil, -1)
			mb, _, err := b.MemberBalancer([]kmsg.JoinGroupResponseMember{m})
			if err != nil {
				t.Fatal(err)
			}
			topicsRead := false
			mb.(kgo.GroupMemberBalancerInfo).SetBalanceInfo(kgo.BalanceInfo{
				Topics: func() map[string]kgo.TopicMetadata {
					topicsRead = true
					return map[string]kgo.TopicMetadata{"t": {Topic: "t", Partitions: []kgo.PartitionMetadata{
						{Partition: 0, Replicas: []int32{1, 2}}, {Partition: 1, Replicas: []int32{2}},
					}}}
				},
				Brokers: func() map[int32]kgo.BrokerMetadata { return tc.brokers },
			})
			if _, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"t": 2}); err != nil {
				t.Fatal(err)
			}
			if got := spy.got["t"].Racks; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("racks %v, want %v", got, tc.want)
			}
			if topicsRead != (tc.want != nil) {
				t.Errorf("kgo's topic metadata read: %v, want %v", topicsRead, tc.want != nil)
			}
		})
	}
}
