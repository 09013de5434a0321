package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/security/acl"
)

// TestDeleteTopicsShapeCheckedBeforeACLs: Kafka's controller
// (ControllerApis.deleteTopics) answers a name given twice ("Duplicate topic
// name."), an ID given twice ("Duplicate topic id.") and an entry naming both
// a name and an ID ("You may not specify both topic name and topic id.") with
// INVALID_REQUEST before it authorizes anything. cohort did so only when the
// principal had CLUSTER DELETE (the request is forwarded unchecked); otherwise
// each such entry was authorized alone and answered TOPIC_AUTHORIZATION_FAILED
// or UNKNOWN_TOPIC_ID.
func TestDeleteTopicsShapeCheckedBeforeACLs(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("t", 1)
	id := catalog.TopicID("t")
	for _, grant := range []struct {
		label string
		acls  []acl.Binding
	}{
		{"no ACL", nil},
		{"DESCRIBE only", []acl.Binding{allow(alice, acl.OpDescribe, acl.ResourceTopic, "t")}},
		{"CLUSTER DELETE", []acl.Binding{allow(alice, acl.OpDelete, acl.ResourceCluster, acl.ClusterName)}},
	} {
		e.grant(grant.acls...)
		cases := map[string]*kmsg.DeleteTopicsRequest{
			"v5 name twice": deleteTopicsReq(5, "t", "t"),
			"v6 name twice": deleteTopicsReq(6, "t", "t"),
		}
		twiceID := deleteTopicsReq(6)
		twiceID.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}, {TopicID: id}}
		cases["v6 id twice"] = twiceID
		both := deleteTopicsReq(6, "t")
		both.Topics[0].TopicID = id
		cases["v6 name and id"] = both
		for label, req := range cases {
			resp := e.as(alice, req).(*kmsg.DeleteTopicsResponse)
			for _, a := range resp.Topics {
				if a.ErrorCode != errInvalidRequest {
					t.Errorf("%s, %s: code %d (%v), want INVALID_REQUEST (42) before any authorization, as Kafka",
						grant.label, label, a.ErrorCode, derefOr(a.ErrorMessage))
				}
			}
			if _, ok := e.cat.Lookup("t"); !ok {
				t.Fatalf("%s, %s: topic deleted", grant.label, label)
			}
		}
	}
}

// __cluster_metadata is Kafka's KRaft log, never a topic: Kafka's
// controller (ControllerApis.createTopics) answers it INVALID_REQUEST before
// it authorizes anything; cohort answered TOPIC_AUTHORIZATION_FAILED to a
// principal without CREATE. A topic that principal may create next to it is
// still created, one it may not still refused.
func TestCreateClusterMetadataTopicRefusedBeforeACLs(t *testing.T) {
	e := newAuthzEnv(t)
	e.grant(allow(alice, acl.OpCreate, acl.ResourceTopic, "mine"))
	req := createReq(false, newTopic(clusterMetadataTopic, 1), newTopic("mine", 1), newTopic("theirs", 1))
	req.SetVersion(7)
	resp := e.as(alice, req).(*kmsg.CreateTopicsResponse)
	want := map[string]int16{clusterMetadataTopic: errInvalidRequest, "mine": 0, "theirs": codeTopicAuthz}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != want[rt.Topic] {
			t.Errorf("%s: code %d, want %d", rt.Topic, rt.ErrorCode, want[rt.Topic])
		}
	}
	if len(resp.Topics) != 3 {
		t.Fatalf("%d answers, want 3", len(resp.Topics))
	}
}

func derefOr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestConsumerGroupDescribeWithheldGroupOmitsOperations: a group withheld for naming
// a topic the principal may not describe is, in Kafka's
// KafkaApis.handleConsumerGroupDescribe, a fresh DescribedGroup with only the
// group id, TOPIC_AUTHORIZATION_FAILED, the message and no members: its
// AuthorizedOperations is the schema default, INT32_MIN, as for every group
// answered with an error. cohort copied the group's operations into it.
func TestConsumerGroupDescribeWithheldGroupOmitsOperations(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("secret", 1)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "g", "m1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"secret"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := e.as(admin, hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("admin heartbeat: %d", r.ErrorCode)
	}
	e.as(admin, hb)
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"))
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Version, d.Groups, d.IncludeAuthorizedOperations = 1, []string{"g"}, true
	g := e.as(alice, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if g.ErrorCode != codeTopicAuthz {
		t.Fatalf("group error %d, want %d", g.ErrorCode, codeTopicAuthz)
	}
	if g.AuthorizedOperations != opsOmitted {
		t.Errorf("withheld group answered AuthorizedOperations %#x; Kafka's error row carries the default %d",
			g.AuthorizedOperations, opsOmitted)
	}
}
