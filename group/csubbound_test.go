package group

import (
	"strconv"
	"strings"
	"testing"
)

// manyTopics returns n distinct topic names.
func manyTopics(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
}

// A classic member's subscription in a consumer-protocol group is bounded
// as a consumer-protocol member's is (the server closes a
// ConsumerGroupHeartbeat naming more than 100,000 topics): a JoinGroup whose
// subscription lists more is refused INCONSISTENT_GROUP_PROTOCOL, as one that
// does not parse, before it is decoded. It was taken: a JoinGroup of a million
// names held the group's coordinator partition for seconds, and so did every
// one after it, while each later heartbeat of the group went over them all.
func TestClassicJoinSubscriptionBounded(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	expectCode(t, "n1 join", h.cgJoin("n1", "a").ErrorCode, ErrNone)
	meta := string(subscription(tpset{}, manyTopics(maxSubscribedTopics+1)...))
	jr := h.joinResp(h.join("cg", jo{client: "c", protos: protos("range", meta)}))
	expectCode(t, "a classic join subscribing to 100,001 topics", jr.ErrorCode, ErrInconsistentProtocol)
	if n := len(h.cgroup("cg").members); n != 1 {
		t.Fatalf("%d members after the refused join", n)
	}
}

// A classic group one of whose members subscribes to more than 100,000
// topics does not become a consumer group: the join that would convert it
// is refused, and the group stays classic.
func TestUpgradeSubscriptionBounded(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 4})
	meta := string(subscription(tpset{}, manyTopics(maxSubscribedTopics+1)...))
	expectCode(t, "classic join", h.joinResp(h.newMember("cg", jo{client: "c", protos: protos("range", meta)})).ErrorCode, ErrNone)
	r := h.cg(hb{member: "n1", names: []string{"a"}, owned: tpset{}})
	expectCode(t, "the join that would convert the group", r.ErrorCode, ErrGroupIDNotFound)
	if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "100000 topics") {
		t.Errorf("message %v, want one naming the bound", r.ErrorMessage)
	}
	if g := h.s.Group("cg"); g == nil || g.cg != nil || len(g.members) != 1 {
		t.Fatal("the refused conversion changed the classic group")
	}
}
