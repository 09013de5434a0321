package server

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A flexible request may encode a string of any length, but Kafka refuses one
// over 32,767 bytes as an invalid request, and so does cohort: the connection
// closes and nothing reaches the coordinator. One of exactly 32,767 bytes is
// served.
func TestOverlongStringsCloseTheConnection(t *testing.T) {
	ts := startServer(t)
	long := strings.Repeat("g", maxStringLen+1)
	limit := strings.Repeat("g", maxStringLen)

	join := func(group string) kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.SetVersion(6)
		r.Group, r.ProtocolType = group, "consumer"
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
		return r
	}
	commitMeta := kmsg.NewPtrOffsetCommitRequest()
	commitMeta.SetVersion(8)
	commitMeta.Group = "g"
	commitMeta.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
		{Partition: 0, Offset: 1}, {Partition: 1, Offset: 1, Metadata: &long},
	}}}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	describe.Groups = []string{"a", long}
	heartbeat := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	heartbeat.Group, heartbeat.MemberID, heartbeat.MemberEpoch = "g", "m", 0
	heartbeat.SubscribedTopicNames = []string{"t", long}

	cases := map[string]kmsg.Request{
		"JoinGroup v6 group id":                        join(long),
		"OffsetCommit v8 partition metadata":           commitMeta,
		"DescribeGroups v5 second group":               describe,
		"ConsumerGroupHeartbeat subscribed topic name": heartbeat,
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			c := ts.dial(t)
			c.send(req, 1)
			c.expectClosed()
		})
	}
	if calls := ts.groups.snapshot(); len(calls) != 0 {
		t.Fatalf("%d requests with over-long strings reached the coordinator (first: %s)", len(calls), kmsg.NameForKey(calls[0].key))
	}

	c := ts.dial(t)
	resp := c.roundTrip(join(limit)).(*kmsg.JoinGroupResponse)
	if resp.MemberID != "member-of-"+limit {
		t.Fatalf("a 32,767-byte group id was not served: member id of %d bytes", len(resp.MemberID))
	}
}

// BenchmarkCheckStrings measures the walk over the largest common request it
// runs on: an OffsetCommit of 2,000 partitions (a 40 KB body), next to the
// decoding of the same body.
func BenchmarkCheckStrings(b *testing.B) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group = "g"
	for ti := range 20 {
		tp := kmsg.OffsetCommitRequestTopic{Topic: "topic-" + strings.Repeat("x", ti)}
		for p := range 100 {
			meta := ""
			tp.Partitions = append(tp.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(p), Offset: 1 << 40, Metadata: &meta})
		}
		req.Topics = append(req.Topics, tp)
	}
	body := req.AppendTo(nil)
	if len(body) <= maxStringLen {
		b.Fatalf("body of %d bytes is not checked", len(body))
	}
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.SetVersion(8)
			if err := r.ReadFrom(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		for range b.N {
			if err := checkStrings(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// checkStrings names the field that is too long, wherever it is; for
// OffsetCommit its fast path must see every string field the walk sees.
func TestCheckStringsNamesTheField(t *testing.T) {
	long := strings.Repeat("x", maxStringLen+1)
	commit := func(set func(*kmsg.OffsetCommitRequest)) *kmsg.OffsetCommitRequest {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{}, {}}}}
		set(r)
		return r
	}
	cases := []struct {
		req  any
		want string
	}{
		{commit(func(r *kmsg.OffsetCommitRequest) { r.Group = long }), "OffsetCommitRequest.Group"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.MemberID = long }), "OffsetCommitRequest.MemberID"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.InstanceID = &long }), "OffsetCommitRequest.InstanceID"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.Topics[0].Topic = long }), "OffsetCommitRequest.Topics.Topic"},
		{commit(func(r *kmsg.OffsetCommitRequest) { r.Topics[0].Partitions[1].Metadata = &long }), "OffsetCommitRequest.Topics.Partitions.Metadata"},
		{&kmsg.JoinGroupRequest{Protocols: []kmsg.JoinGroupRequestProtocol{{Name: "a"}, {Name: long}}}, "JoinGroupRequest.Protocols.Name"},
		{&kmsg.ConsumerGroupHeartbeatRequest{SubscribedTopicRegex: &long}, "ConsumerGroupHeartbeatRequest.SubscribedTopicRegex"},
	}
	for _, c := range cases {
		err := checkStrings(c.req)
		if err == nil || !strings.HasPrefix(err.Error(), c.want+" is a string of 32768 bytes") {
			t.Errorf("%s too long: got %v", c.want, err)
		}
	}
	// Every string field of an OffsetCommit, as the reflective walk finds
	// them, is one the cases above make too long.
	var fields []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, path string) {
		switch t.Kind() {
		case reflect.String:
			fields = append(fields, path)
		case reflect.Pointer, reflect.Slice:
			walk(t.Elem(), path)
		case reflect.Struct:
			for _, i := range fieldsWithStrings(t) {
				walk(t.Field(i).Type, path+"."+t.Field(i).Name)
			}
		}
	}
	walk(reflect.TypeFor[kmsg.OffsetCommitRequest](), "OffsetCommitRequest")
	for _, f := range fields {
		if !slices.ContainsFunc(cases, func(c struct {
			req  any
			want string
		}) bool {
			return c.want == f
		}) {
			t.Errorf("OffsetCommit's string field %s is not covered", f)
		}
	}
	if len(fields) != 5 {
		t.Errorf("found %d string fields in OffsetCommitRequest: %q", len(fields), fields)
	}
	if err := checkStrings(commit(func(*kmsg.OffsetCommitRequest) {})); err != nil {
		t.Errorf("a request without long strings: %v", err)
	}
}
