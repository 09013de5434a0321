package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// TestAuthzConsumerGroupProtocol: ConsumerGroupHeartbeat needs GROUP READ
// and TOPIC DESCRIBE on every topic subscribed by name (Kafka's checks, in
// that order); ConsumerGroupDescribe needs GROUP DESCRIBE per group, a
// refused group answered GROUP_AUTHORIZATION_FAILED alone.
func TestAuthzConsumerGroupProtocol(t *testing.T) {
	e := newAuthzEnv(t)
	hb := func() *kmsg.ConsumerGroupHeartbeatRequest {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = 1, "g", "m1", 60000
		req.SubscribedTopicNames, req.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return req
	}
	code := func(req kmsg.Request) int16 { return e.as(alice, req).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }
	if got := code(hb()); got != codeGroupAuthz {
		t.Fatalf("no ACLs: error %d, want %d", got, codeGroupAuthz)
	}
	e.grant(allow(alice, acl.OpRead, acl.ResourceGroup, "g"))
	if got := code(hb()); got != codeTopicAuthz {
		t.Fatalf("GROUP READ only: error %d, want %d", got, codeTopicAuthz)
	}
	e.grant(allow(alice, acl.OpRead, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "t"))
	if got := code(hb()); got != 0 {
		t.Fatalf("GROUP READ and TOPIC DESCRIBE: error %d", got)
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Version, d.Groups = 1, []string{"g", "other"}
	resp := e.as(alice, d).(*kmsg.ConsumerGroupDescribeResponse)
	if len(resp.Groups) != 2 || resp.Groups[0].Group != "g" || resp.Groups[1].ErrorCode != codeGroupAuthz {
		t.Fatalf("describe without DESCRIBE: %+v", resp.Groups)
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"))
	resp = e.as(alice, d).(*kmsg.ConsumerGroupDescribeResponse)
	if resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Members) != 1 || resp.Groups[1].ErrorCode != codeGroupAuthz {
		t.Fatalf("describe with DESCRIBE on g: %+v", resp.Groups)
	}
}

// A described consumer group whose members' assignment or target names a
// topic the caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED,
// without its members, as Kafka does; with DESCRIBE on the topic the group is
// described. (cohort checked only GROUP DESCRIBE: the assignment revealed the
// topic.)
func TestConsumerGroupDescribeHidesUndescribableTopics(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("secret", 1)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "g", "m1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"secret"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := e.as(admin, hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("admin heartbeat: %d", r.ErrorCode)
	}
	r1 := e.as(admin, hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	hb2 := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb2.Version, hb2.Group, hb2.MemberID, hb2.MemberEpoch, hb2.RebalanceTimeoutMillis = 1, "g", "m1", r1.MemberEpoch, -1
	e.as(admin, hb2)
	// alice may describe the group, not the topic.
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"))
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Version, d.Groups = 1, []string{"g"}
	g := e.as(alice, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	var names []string
	for _, m := range g.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			names = append(names, tp.Topic)
		}
		for _, tp := range m.TargetAssignment.TopicPartitions {
			names = append(names, tp.Topic)
		}
	}
	if g.ErrorCode != codeTopicAuthz || len(g.Members) != 0 {
		t.Fatalf("group error %d, %d members, assignment topics %q revealed; Kafka: %d and no members",
			g.ErrorCode, len(g.Members), names, codeTopicAuthz)
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "secret"))
	if g := e.as(alice, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("with DESCRIBE on the topic: error %d, %d members", g.ErrorCode, len(g.Members))
	}
}
