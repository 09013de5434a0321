package sticky

import (
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinMembers encodes the group the way a broker hands it to a leader:
// JoinGroup members with ConsumerMemberMetadata v3.
func joinMembers(g group) []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, m := range g.members {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Topics = m.Topics
		meta.UserData = m.UserData
		meta.Generation = m.Generation
		for _, o := range m.Owned {
			meta.OwnedPartitions = append(meta.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: o.Topic, Partitions: o.Partitions})
		}
		out = append(out, kmsg.JoinGroupResponseMember{MemberID: m.ID, ProtocolMetadata: meta.AppendTo(nil)})
	}
	return out
}

func partitionCounts(g group) map[string]int32 {
	out := make(map[string]int32, len(g.topics))
	for n, t := range g.topics {
		out[n] = t.Partitions
	}
	return out
}

// franzPlan runs franz-go's balancer through its public GroupBalancer API.
func franzPlan(tb testing.TB, b kgo.GroupBalancer, g group) map[tp]string {
	mb, _, err := b.MemberBalancer(joinMembers(g))
	if err != nil {
		tb.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(partitionCounts(g))
	if err != nil {
		tb.Fatal(err)
	}
	got := map[tp]string{}
	for id, topics := range into.(*kgo.BalancePlan).AsMemberIDMap() {
		for topic, parts := range topics {
			for _, p := range parts {
				got[tp{topic, p}] = id
			}
		}
	}
	return got
}

func saramaPlan(tb testing.TB, g group) map[tp]string {
	members := map[string]sarama.ConsumerGroupMemberMetadata{}
	for _, m := range g.members {
		members[m.ID] = sarama.ConsumerGroupMemberMetadata{Version: 1, Topics: m.Topics, UserData: m.UserData}
	}
	topics := map[string][]int32{}
	for n, t := range g.topics {
		for p := int32(0); p < t.Partitions; p++ {
			topics[n] = append(topics[n], p)
		}
	}
	plan, err := sarama.NewBalanceStrategySticky().Plan(members, topics)
	if err != nil {
		tb.Fatal(err)
	}
	got := map[tp]string{}
	for id, topics := range plan {
		for topic, parts := range topics {
			for _, p := range parts {
				got[tp{topic, p}] = id
			}
		}
	}
	return got
}

// atLeastAsGood asserts our plan is as balanced as theirs (sorted loads
// lexicographically no larger) and, when equally balanced, keeps at least
// as many partitions with their previous owner.
func atLeastAsGood(t *testing.T, who string, seed int, g group, ours, theirs map[tp]string) (better bool) {
	t.Helper()
	_, prev := refClaims(g.members)
	lo, lt := sortedDesc(loadsOf(g, ours)), sortedDesc(loadsOf(g, theirs))
	switch c := slices.Compare(lo, lt); {
	case c > 0:
		t.Fatalf("seed %d: %s better balanced: ours %v, theirs %v", seed, who, lo, lt)
	case c < 0:
		return true
	}
	ko, kt := kept(prev, ours), kept(prev, theirs)
	if ko < kt {
		t.Fatalf("seed %d: %s keeps %d partitions, we keep %d", seed, who, kt, ko)
	}
	return ko > kt
}

func TestCompareFranzGo(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		// No tied claims: franz-go gives a tied partition to one of the
		// claimants, Kafka to neither, and kept would then differ by design.
		g := genGroup(rng, genOpts{maxMembers: 12, maxTopics: 5, maxParts: 12, mixed: seed%2 == 0, history: true})
		ours := validate(t, g, assignOrFatal(t, New(), g), true)
		atLeastAsGood(t, "franz-go sticky", seed, g, ours, franzPlan(t, kgo.StickyBalancer(), g))

		// Cooperative: round one must hand out at least as much as
		// franz-go (withhold no more) while being just as safe. Cooperative
		// members report what they own in the subscription (v2+).
		for i := range g.members {
			m := &g.members[i]
			if len(m.Owned) == 0 {
				if owned, gen, err := decodeUserData(m.UserData); err == nil {
					m.Owned, m.Generation = owned, gen
				}
			}
		}
		coop := assignOrFatal(t, NewCooperative(), g)
		checkCooperative(t, g, coop)
		ourCount := len(validate(t, g, coop, false))
		theirs := franzPlan(t, kgo.CooperativeStickyBalancer(), g)
		if ourCount < len(theirs) {
			t.Fatalf("seed %d: cooperative round assigns %d partitions, franz-go %d", seed, ourCount, len(theirs))
		}
	}
}

func TestCompareSarama(t *testing.T) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	better := 0
	for seed := 0; seed < seeds; seed++ {
		rng := rand.New(rand.NewSource(int64(seed)))
		g := genGroup(rng, genOpts{maxMembers: 8, maxTopics: 4, maxParts: 8, mixed: seed%2 == 0, history: true})
		for i := range g.members { // sarama (eager) reads user data only
			g.members[i].Owned, g.members[i].Generation = nil, -1
		}
		ours := validate(t, g, assignOrFatal(t, New(), g), true)
		if atLeastAsGood(t, "sarama sticky", seed, g, ours, saramaPlan(t, g)) {
			better++
		}
	}
	t.Logf("strictly better than sarama in %d of %d groups", better, seeds)
}

// TestUserDataInterop: franz-go's and sarama's sticky user data decode to
// what they encoded, and they honour ours (they keep every partition when
// nothing forces a move).
func TestUserDataInterop(t *testing.T) {
	current := map[string][]int32{"b": {4, 2}, "a": {0}}
	want := []assign.TopicPartitions{{Topic: "a", Partitions: []int32{0}}, {Topic: "b", Partitions: []int32{2, 4}}}

	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(kgo.StickyBalancer().JoinGroupMetadata([]string{"a", "b"}, current, 12)); err != nil {
		t.Fatal(err)
	}
	got, gen, err := decodeUserData(meta.UserData)
	for i := range got {
		slices.Sort(got[i].Partitions)
	}
	if err != nil || gen != 12 || !reflect.DeepEqual(got, want) {
		t.Fatalf("franz-go user data: %v gen %d err %v", got, gen, err)
	}

	sb, err := sarama.NewBalanceStrategySticky().AssignmentData("m", current, 12)
	if err != nil {
		t.Fatal(err)
	}
	got, gen, err = decodeUserData(sb)
	slices.SortFunc(got, func(x, y assign.TopicPartitions) int { return strings.Compare(x.Topic, y.Topic) })
	for i := range got {
		slices.Sort(got[i].Partitions)
	}
	if err != nil || gen != 12 || !reflect.DeepEqual(got, want) {
		t.Fatalf("sarama user data: %v gen %d err %v", got, gen, err)
	}

	// Ours, read by them: a balanced previous plan must survive unchanged.
	topics := map[string]assign.Topic{"a": {Name: "a", Partitions: 3}, "b": {Name: "b", Partitions: 5}}
	prevPlan := map[string][]assign.TopicPartitions{
		"m1": {{Topic: "a", Partitions: []int32{2}}, {Topic: "b", Partitions: []int32{0, 3}}},
		"m2": {{Topic: "b", Partitions: []int32{1, 2, 4}}},
		"m3": {{Topic: "a", Partitions: []int32{0, 1}}},
	}
	g := group{topics: topics}
	for _, id := range []string{"m1", "m2", "m3"} {
		g.members = append(g.members, assign.Member{ID: id, Topics: []string{"a", "b"}, Generation: -1, UserData: New().UserData(prevPlan[id], 5)})
	}
	_, prev := refClaims(g.members)
	for who, plan := range map[string]map[tp]string{"franz-go": franzPlan(t, kgo.StickyBalancer(), g), "sarama": saramaPlan(t, g)} {
		if !reflect.DeepEqual(plan, prev) {
			t.Fatalf("%s did not keep the plan from our user data: %v", who, plan)
		}
	}
}
