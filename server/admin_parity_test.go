package server

// Metadata and topic-admin answers checked against Kafka's: each test states
// the behaviour of Kafka's broker or controller it compares with (found by a
// review; each failed before its fix).

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// CreateTopics v5+: a created topic is answered with
// TopicConfigErrorCode 0 and NumPartitions set but Configs = null. Kafka's
// controller (ReplicationControlManager.createTopic) always answers a
// non-null list (the topic's effective configs) when it answers the
// partition count, and the Java admin client
// (KafkaAdminClient.getCreateTopicsCall handleResponse) does
// `result.configs().stream()` in exactly that case: a NullPointerException,
// which fails every pending future of the createTopics call although the
// topic was created (kafka-topics.sh --create, Spring KafkaAdmin...).
func TestCreateTopicsConfigsNeverNull(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	for v := int16(5); v <= 7; v++ {
		for _, validate := range []bool{false, true} {
			name := "cfg-" + string(rune('a'+v)) + map[bool]string{false: "-c", true: "-v"}[validate]
			req := createReq(validate, newTopic(name, 2))
			req.SetVersion(v)
			resp := c.roundTrip(req).(*kmsg.CreateTopicsResponse)
			rt := resp.Topics[0]
			if rt.ErrorCode != 0 {
				t.Fatalf("v%d validate=%v: error %d", v, validate, rt.ErrorCode)
			}
			if rt.ConfigErrorCode == 0 && rt.NumPartitions != -1 && rt.Configs == nil {
				t.Errorf("v%d validate=%v: TopicConfigErrorCode 0, NumPartitions %d, Configs null: the Java admin client NPEs on result.configs().stream()",
					v, validate, rt.NumPartitions)
			}
		}
	}
}

// CreatePartitions check order (Kafka ReplicationControlManager.
// createPartitions: unknown topic, then count, then assignment count, then
// each replica list).
func TestCreatePartitionsChecksTopicAndCountFirst(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "g", 2, nil)
	mk := func(topic string, count int32, reps ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		rt.Assignment = []kmsg.CreatePartitionsRequestTopicAssignment{}
		for _, r := range reps {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: r})
		}
		return rt
	}
	for _, tc := range []struct {
		name string
		tp   kmsg.CreatePartitionsRequestTopic
		want int16
	}{
		{"missing topic, unknown broker", mk("ghost", 3, []int32{9}), 3},
		{"missing topic, empty replicas", mk("ghost", 3, []int32{}), 3},
		{"same count, unknown broker", mk("g", 2, []int32{9}), 37},
		{"lower count, dup broker", mk("g", 1, []int32{0, 0}), 37},
	} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = true
		req.Topics = []kmsg.CreatePartitionsRequestTopic{tc.tp}
		resp := ts.dial(t).roundTrip(req).(*kmsg.CreatePartitionsResponse)
		if c := resp.Topics[0].ErrorCode; c != tc.want {
			t.Errorf("%s: error %d, want %d (Kafka checks the topic and its count before the replica lists)", tc.name, c, tc.want)
		}
	}
}

// Metadata is_internal for Kafka's internal topic names.
func TestMetadataIsInternal(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "__transaction_state", 1, nil)
	c := ts.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, n := range []string{"__consumer_offsets", "__transaction_state"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	for _, tp := range resp.Topics {
		if !tp.IsInternal {
			t.Errorf("%s (error %d): is_internal false, Kafka answers Topic.isInternal(name) = true", *tp.Topic, tp.ErrorCode)
		}
	}
}

// Metadata topic authorized operations for an unknown topic.
func TestMetadataAuthorizedOpsOfUnknownTopic(t *testing.T) {
	ts := startServer(t)
	c := ts.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.IncludeTopicAuthorizedOperations = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("ghost")
	req.Topics = append(req.Topics, rt)
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if ops := resp.Topics[0].AuthorizedOperations; ops != 3576 {
		t.Errorf("unknown topic: authorized operations %d, Kafka (no authorizer) 3576", ops)
	}
}

// Metadata v10/v11 with a topic id or a null name.
func TestMetadataV10V11RefuseTopicIDs(t *testing.T) {
	ts := startServer(t)
	tp := createTopic(t, ts.srv.Catalog(), "orders", 1, nil)
	c := ts.dial(t)
	for _, v := range []int16{10, 11} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("orders")
		rt.TopicID = tp.ID
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		if resp.Topics[0].ErrorCode != 42 {
			t.Errorf("v%d with a topic id: error %d, Kafka INVALID_REQUEST (42)", v, resp.Topics[0].ErrorCode)
		}
	}
}

// DescribeConfigs GROUP with an empty (non-null) list of config
// names: Kafka (ConfigHelper.describeConfigs) answers every config.
func TestDescribeConfigsEmptyNamesMeansAll(t *testing.T) {
	ts := startServer(t)
	for _, v := range []int16{1, 4} {
		req := describeConfigsReq(v, kmsg.ConfigResourceTypeGroupConfig, "g")
		req.Resources[0].ConfigNames = []string{}
		resp := ts.dial(t).roundTrip(req).(*kmsg.DescribeConfigsResponse)
		all := describeConfigsReq(v, kmsg.ConfigResourceTypeGroupConfig, "g")
		respAll := ts.dial(t).roundTrip(all).(*kmsg.DescribeConfigsResponse)
		if len(respAll.Resources[0].Configs) == 0 {
			t.Fatalf("v%d: null list answered no configs", v)
		}
		if got := len(resp.Resources[0].Configs); got != len(respAll.Resources[0].Configs) {
			t.Errorf("v%d: empty config-name list answered %d configs, null list %d; Kafka treats both as all", v, got, len(respAll.Resources[0].Configs))
		}
	}
}

// OffsetCommit of a topic name no Kafka cluster can have (illegal
// characters, "..", over 249 characters). Kafka (KafkaApis.
// handleOffsetCommitRequest) answers UNKNOWN_TOPIC_OR_PARTITION for any
// topic not in its metadata; cohort keeps that answer for a topic "no
// cluster can have" (empty name, negative partition) but forwards these.
func TestOffsetCommitIllegalTopicName(t *testing.T) {
	ts := startDataPlane(t)
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		return group.ErrorResponse(req, 0), nil
	}
	long := strings.Repeat("x", 250)
	resp := answer(t, ts.srv, commitReq(8, "g", "bad/name:0", "..:0", long+":0", "elsewhere:0")).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), "bad/name/0=3 ../0=3 "+long+"/0=3 elsewhere/0=0"; got != want {
		t.Errorf("answer %s\nwant   %s", got, want)
	}
}

// DeleteTopics v6 naming one topic by its name and by its ID.
// Kafka (ControllerApis.deleteTopics): the name entry is INVALID_REQUEST
// "The provided topic name maps to an ID that was already supplied." and
// the topic is not deleted.
func TestDeleteTopicsNameAndIDOfSameTopic(t *testing.T) {
	ts := startServer(t)
	tp := createTopic(t, ts.srv.Catalog(), "orders", 1, nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = tp.ID
	byName := kmsg.NewDeleteTopicsRequestTopic()
	byName.Topic = kmsg.StringPtr("orders")
	req.Topics = []kmsg.DeleteTopicsRequestTopic{byID, byName}
	resp := ts.dial(t).roundTrip(req).(*kmsg.DeleteTopicsResponse)
	for _, r := range resp.Topics {
		t.Logf("%v %x: %d %v", r.Topic, r.TopicID, r.ErrorCode, r.ErrorMessage)
	}
	if _, ok := ts.srv.Catalog().Lookup("orders"); !ok {
		t.Errorf("the topic was deleted; Kafka refuses the name entry (INVALID_REQUEST) and deletes nothing")
	}
}
