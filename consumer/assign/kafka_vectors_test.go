package assign_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// flat renders an assignor result as member -> sorted "topic-partition"
// strings, which keeps expectations short.
func flat(res map[string]assign.Assignment) map[string][]string {
	out := map[string][]string{}
	for id, a := range res {
		list := []string{}
		for _, tp := range a.Partitions {
			for _, p := range tp.Partitions {
				list = append(list, fmt.Sprintf("%s-%d", tp.Topic, p))
			}
		}
		slices.Sort(list)
		out[id] = list
	}
	return out
}

func sub(id string, topics ...string) assign.Member {
	return assign.Member{ID: id, Topics: topics, Generation: -1}
}

func static(id, instance string, topics ...string) assign.Member {
	m := sub(id, topics...)
	m.InstanceID = instance
	return m
}

func meta(counts map[string]int32) map[string]assign.Topic {
	out := map[string]assign.Topic{}
	for t, n := range counts {
		out[t] = assign.Topic{Name: t, Partitions: n}
	}
	return out
}

type vector struct {
	name    string
	members []assign.Member
	topics  map[string]int32
	want    map[string][]string
}

func runVectors(t *testing.T, a assign.Assignor, vs []vector) {
	t.Helper()
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			res, err := a.Assign(v.members, meta(v.topics))
			if err != nil {
				t.Fatal(err)
			}
			if got := flat(res); !reflect.DeepEqual(got, v.want) {
				t.Errorf("got  %v\nwant %v", got, v.want)
			}
		})
	}
}

// Scenarios and expected results of Kafka's RangeAssignorTest
// (clients/src/test/java/org/apache/kafka/clients/consumer).
func TestRangeKafkaScenarios(t *testing.T) {
	two := []string{"topic1", "topic2"}
	runVectors(t, assign.Range(), []vector{
		{"OneConsumerNoTopic", []assign.Member{sub("consumer1")}, nil,
			map[string][]string{"consumer1": {}}},
		{"OneConsumerNonexistentTopic", []assign.Member{sub("consumer1", "topic1")}, nil,
			map[string][]string{"consumer1": {}}},
		{"OnlyAssignsPartitionsFromSubscribedTopics", []assign.Member{sub("consumer1", "topic1")}, map[string]int32{"topic1": 3, "other": 3},
			map[string][]string{"consumer1": {"topic1-0", "topic1-1", "topic1-2"}}},
		{"OneConsumerMultipleTopics", []assign.Member{sub("consumer1", two...)}, map[string]int32{"topic1": 1, "topic2": 2},
			map[string][]string{"consumer1": {"topic1-0", "topic2-0", "topic2-1"}}},
		{"TwoConsumersOneTopicOnePartition", []assign.Member{sub("consumer1", "topic1"), sub("consumer2", "topic1")}, map[string]int32{"topic1": 1},
			map[string][]string{"consumer1": {"topic1-0"}, "consumer2": {}}},
		{"MultipleConsumersMixedTopics", []assign.Member{sub("consumer1", "topic1"), sub("consumer2", two...), sub("consumer3", "topic1")}, map[string]int32{"topic1": 3, "topic2": 2},
			map[string][]string{"consumer1": {"topic1-0"}, "consumer2": {"topic1-1", "topic2-0", "topic2-1"}, "consumer3": {"topic1-2"}}},
		{"TwoConsumersTwoTopicsSixPartitions", []assign.Member{sub("consumer1", two...), sub("consumer2", two...)}, map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer1": {"topic1-0", "topic1-1", "topic2-0", "topic2-1"}, "consumer2": {"topic1-2", "topic2-2"}}},
		// Static members compare by instance id, not member id.
		{"TwoStaticConsumers", []assign.Member{static("consumer-b", "instance1", two...), static("consumer-a", "instance2", two...)}, map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer-b": {"topic1-0", "topic1-1", "topic2-0", "topic2-1"}, "consumer-a": {"topic1-2", "topic2-2"}}},
		// A static member sorts before every dynamic one.
		{"OneStaticOneDynamic", []assign.Member{static("consumer-b", "instance1", two...), sub("consumer-a", two...)}, map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer-b": {"topic1-0", "topic1-1", "topic2-0", "topic2-1"}, "consumer-a": {"topic1-2", "topic2-2"}}},
		{"StaticMemberRangeAssignmentPersistent", []assign.Member{
			static("consumer1", "instance1", two...), static("consumer2", "instance2", two...), static("consumer3", "instance3", two...), sub("consumer4", two...)},
			map[string]int32{"topic1": 5, "topic2": 4},
			map[string][]string{"consumer1": {"topic1-0", "topic1-1", "topic2-0"}, "consumer2": {"topic1-2", "topic2-1"}, "consumer3": {"topic1-3", "topic2-2"}, "consumer4": {"topic1-4", "topic2-3"}}},
		{"StaticMemberRangeAssignmentPersistent/replaced dynamic", []assign.Member{
			static("consumer1", "instance1", two...), static("consumer2", "instance2", two...), static("consumer3", "instance3", two...), sub("consumer5", two...)},
			map[string]int32{"topic1": 5, "topic2": 4},
			map[string][]string{"consumer1": {"topic1-0", "topic1-1", "topic2-0"}, "consumer2": {"topic1-2", "topic2-1"}, "consumer3": {"topic1-3", "topic2-2"}, "consumer5": {"topic1-4", "topic2-3"}}},
	})
}

// Scenarios and expected results of Kafka's RoundRobinAssignorTest.
func TestRoundRobinKafkaScenarios(t *testing.T) {
	two := []string{"topic1", "topic2"}
	runVectors(t, assign.RoundRobin(), []vector{
		{"OneConsumerNoTopic", []assign.Member{sub("consumer1")}, nil,
			map[string][]string{"consumer1": {}}},
		{"OneConsumerOneTopic", []assign.Member{sub("consumer1", "topic1")}, map[string]int32{"topic1": 3},
			map[string][]string{"consumer1": {"topic1-0", "topic1-1", "topic1-2"}}},
		{"OnlyAssignsPartitionsFromSubscribedTopics", []assign.Member{sub("consumer1", "topic1")}, map[string]int32{"topic1": 3, "other": 3},
			map[string][]string{"consumer1": {"topic1-0", "topic1-1", "topic1-2"}}},
		{"TwoConsumersOneTopicOnePartition", []assign.Member{sub("consumer1", "topic1"), sub("consumer2", "topic1")}, map[string]int32{"topic1": 1},
			map[string][]string{"consumer1": {"topic1-0"}, "consumer2": {}}},
		{"MultipleConsumersMixedTopics", []assign.Member{sub("consumer1", "topic1"), sub("consumer2", two...), sub("consumer3", "topic1")}, map[string]int32{"topic1": 3, "topic2": 2},
			map[string][]string{"consumer1": {"topic1-0"}, "consumer2": {"topic1-1", "topic2-0", "topic2-1"}, "consumer3": {"topic1-2"}}},
		{"TwoDynamicConsumersTwoTopicsSixPartitions", []assign.Member{sub("consumer1", two...), sub("consumer2", two...)}, map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer1": {"topic1-0", "topic1-2", "topic2-1"}, "consumer2": {"topic1-1", "topic2-0", "topic2-2"}}},
		{"TwoStaticConsumersTwoTopicsSixPartitions", []assign.Member{static("consumer-b", "instance1", two...), static("consumer-a", "instance2", two...)}, map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer-b": {"topic1-0", "topic1-2", "topic2-1"}, "consumer-a": {"topic1-1", "topic2-0", "topic2-2"}}},
		{"OneStaticConsumerAndOneDynamic", []assign.Member{static("consumer-b", "instance1", two...), sub("consumer-a", two...)}, map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer-b": {"topic1-0", "topic1-2", "topic2-1"}, "consumer-a": {"topic1-1", "topic2-0", "topic2-2"}}},
		{"StaticMemberAssignmentPersistent", []assign.Member{
			static("consumer1", "instance1", two...), static("consumer2", "instance2", two...), static("consumer3", "instance3", two...), sub("consumer4", two...)},
			map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer1": {"topic1-0", "topic2-1"}, "consumer2": {"topic1-1", "topic2-2"}, "consumer3": {"topic1-2"}, "consumer4": {"topic2-0"}}},
		// Member ids change, instance ids stay: partitions follow instances.
		{"StaticMemberAssignmentPersistentAfterMemberIdChanges", []assign.Member{
			static("consumer4", "instance1", two...), static("consumer5", "instance2", two...), static("consumer1", "instance3", two...)},
			map[string]int32{"topic1": 3, "topic2": 3},
			map[string][]string{"consumer4": {"topic1-0", "topic2-0"}, "consumer5": {"topic1-1", "topic2-1"}, "consumer1": {"topic1-2", "topic2-2"}}},
	})
}

func TestBadInputIsAnError(t *testing.T) {
	for _, name := range assign.Names() {
		a, _ := assign.ByName(name)
		if _, err := a.Assign([]assign.Member{sub("a", "t"), sub("a", "t")}, meta(map[string]int32{"t": 1})); err == nil {
			t.Errorf("%s: duplicate member ids accepted", name)
		}
		if _, err := a.Assign([]assign.Member{sub("", "t")}, meta(map[string]int32{"t": 1})); err == nil {
			t.Errorf("%s: empty member id accepted", name)
		}
		if _, err := a.Assign([]assign.Member{sub("a", "t")}, meta(map[string]int32{"t": -3})); err == nil {
			t.Errorf("%s: negative partition count accepted", name)
		}
	}
}

func TestRegistry(t *testing.T) {
	for _, name := range assign.Names() {
		a, ok := assign.ByName(name)
		if !ok || a.Name() != name || a.Cooperative() || a.UserData(nil, -1) != nil {
			t.Errorf("ByName(%q) = %v, %v", name, a, ok)
		}
	}
	if _, ok := assign.ByName("sticky"); ok {
		t.Error("sticky is not this package's to register")
	}
}
