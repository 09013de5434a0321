package server

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
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

// TestDescribeGroupsWithholdsConsumerHistory: the rebalance history that
// DescribeGroups carries on request (group.HistoryTag) names the topics a
// consumer-protocol group's members gained; it is withheld (a doc saying so,
// without events) for a principal that may describe the group but not such
// a topic (ConsumerGroupDescribe withholds that group whole), also after the
// member left, and given with DESCRIBE on the topic. Another group's history
// stays.
func TestDescribeGroupsWithholdsConsumerHistory(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("secret", 1)
	e.ensureTopic("public", 1)
	join := func(grp, topic string) {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, grp, "m-"+grp, 60000
		hb.SubscribedTopicNames, hb.Topics = []string{topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := e.as(admin, hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("%s: heartbeat %d", grp, r.ErrorCode)
		}
		// Acknowledge the assignment: the rebalance completes and is
		// recorded with the partitions the member gained.
		ack := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		ack.Version, ack.Group, ack.MemberID, ack.MemberEpoch, ack.RebalanceTimeoutMillis = 1, grp, "m-"+grp, r.MemberEpoch, -1
		if r.Assignment != nil {
			for _, tp := range r.Assignment.Topics {
				ack.Topics = append(ack.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
			}
		}
		e.as(admin, ack)
	}
	join("g", "secret")
	join("pub", "public")
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceGroup, "pub"),
		allow(alice, acl.OpDescribe, acl.ResourceTopic, "public"))
	// history reports whether who is given g's and pub's events.
	history := func(who string) (g, pub bool) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = 5, []string{"g", "pub"}
		group.RequestHistory(req, -1)
		resp := e.as(who, req).(*kmsg.DescribeGroupsResponse)
		given := func(i int) bool {
			doc, ok := group.HistoryTagOf(&resp.Groups[i])
			if !ok {
				t.Fatalf("%s: no history doc for %s", who, resp.Groups[i].Group)
			}
			if doc.Withheld != (len(doc.History) == 0) {
				t.Fatalf("%s: %s withheld %v with %d events", who, resp.Groups[i].Group, doc.Withheld, len(doc.History))
			}
			return !doc.Withheld
		}
		return given(0), given(1)
	}
	if g, pub := history(admin); !g || !pub {
		t.Fatalf("admin: history of g %v, pub %v; want both (the test shows nothing otherwise)", g, pub)
	}
	if g, pub := history(alice); g || !pub {
		t.Fatalf("alice without DESCRIBE on secret: history of g %v (want withheld), pub %v", g, pub)
	}
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Version, leave.Group, leave.MemberID, leave.MemberEpoch = 1, "g", "m-g", -1
	e.as(admin, leave)
	if g, _ := history(alice); g {
		t.Fatal("after the member left: g's history given to alice")
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceGroup, "pub"),
		allow(alice, acl.OpDescribe, acl.ResourceTopic, "public"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "secret"))
	if g, _ := history(alice); !g {
		t.Fatal("with DESCRIBE on secret: g's history withheld")
	}
}

// TestConsumerGroupDescribeHidesRevokingTopics: a member that unsubscribed
// from a topic still holds its partitions until it acknowledges the
// revocation; they are in neither its assignment nor its target, only in
// cohort's RevokingTag. A principal that may not describe that topic must
// not learn it from the tag: the group is withheld as for an assigned topic.
func TestConsumerGroupDescribeHidesRevokingTopics(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("secret", 1)
	e.ensureTopic("public", 1)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "g", "m1", 60000
	hb.SubscribedTopicNames, hb.Topics = []string{"secret"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r1 := e.as(admin, hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r1.ErrorCode != 0 || r1.Assignment == nil || len(r1.Assignment.Topics) != 1 {
		t.Fatalf("admin heartbeat: %d %+v", r1.ErrorCode, r1.Assignment)
	}
	owned := []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: r1.Assignment.Topics[0].TopicID, Partitions: []int32{0}}}
	hb2 := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb2.Version, hb2.Group, hb2.MemberID, hb2.MemberEpoch, hb2.RebalanceTimeoutMillis = 1, "g", "m1", r1.MemberEpoch, -1
	hb2.Topics = owned
	e.as(admin, hb2)
	// It moves to public, still owning secret-0: that is now pending revocation.
	hb2.SubscribedTopicNames = []string{"public"}
	if r := e.as(admin, hb2).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("subscription change: %d", r.ErrorCode)
	}
	// The target is computed at the first heartbeat after the assignment
	// wait (--consumer-assignment-interval), on the coordinator's clock.
	e.clk.Advance(time.Second)
	hb2.SubscribedTopicNames = nil
	if r := e.as(admin, hb2).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat after the subscription change: %d", r.ErrorCode)
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Version, d.Groups = 1, []string{"g"}
	g := e.as(admin, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	if len(g.Members) != 1 {
		t.Fatalf("admin's describe: %+v", g)
	}
	if rv, ok := group.RevokingOf(&g.Members[0]); !ok || len(rv) != 1 || rv[0].Topic != "secret" {
		t.Fatalf("the member's revoking tag: %+v %v; want secret", rv, ok)
	}
	for _, a := range []kmsg.Assignment{g.Members[0].Assignment, g.Members[0].TargetAssignment} {
		for _, tp := range a.TopicPartitions {
			if tp.Topic == "secret" {
				t.Fatalf("secret in the assignment or target: the test does not isolate the tag")
			}
		}
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "public"))
	if g := e.as(alice, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]; g.ErrorCode != codeTopicAuthz || len(g.Members) != 0 {
		t.Fatalf("alice, who may not describe secret: error %d, %d members; want %d and none", g.ErrorCode, len(g.Members), codeTopicAuthz)
	}
}
