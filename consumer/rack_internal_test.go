package consumer

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/consumer/assign"
)

// TestTopicsFromMetadata: replica racks come from the brokers' racks and
// each partition's replica ids, in replica order, without repeats;
// brokers without a rack and unknown node ids contribute nothing.
func TestTopicsFromMetadata(t *testing.T) {
	broker := func(id int32, rack string) kmsg.MetadataResponseBroker {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = id
		if rack != "" {
			b.Rack = kmsg.StringPtr(rack)
		}
		return b
	}
	part := func(id int32, replicas ...int32) kmsg.MetadataResponseTopicPartition {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Replicas = id, replicas
		return p
	}
	topic := func(name string, code int16, parts ...kmsg.MetadataResponseTopicPartition) kmsg.MetadataResponseTopic {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic, tp.ErrorCode, tp.Partitions = kmsg.StringPtr(name), code, parts
		return tp
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Brokers = []kmsg.MetadataResponseBroker{broker(1, "r1"), broker(2, "r2"), broker(3, ""), broker(4, "r1")}
	resp.Topics = []kmsg.MetadataResponseTopic{
		// Partitions out of order; 1 and 4 share a rack; 3 has none; 9
		// is no broker; partition 7 is out of range and ignored.
		topic("a", 0, part(2, 3), part(0, 2, 1, 4), part(1, 4, 9, 2), part(7, 1)),
		topic("b", 3), // UNKNOWN_TOPIC_OR_PARTITION
		topic("c", 0, part(0, 3), part(1, 9)),
	}
	nameless := kmsg.NewMetadataResponseTopic()
	resp.Topics = append(resp.Topics, nameless)
	got := topicsFromMetadata(resp)
	want := map[string]assign.Topic{
		"a": {Name: "a", Partitions: 4, Racks: [][]string{{"r2", "r1"}, {"r1", "r2"}, nil, nil}},
		"c": {Name: "c", Partitions: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// No broker with a rack: no racks anywhere.
	resp.Brokers = []kmsg.MetadataResponseBroker{broker(1, ""), broker(2, "")}
	for name, tp := range topicsFromMetadata(resp) {
		if tp.Racks != nil {
			t.Errorf("%s: racks %v without rack-aware brokers", name, tp.Racks)
		}
	}
}
