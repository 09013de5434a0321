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
