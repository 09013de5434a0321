package group

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/security/acl"
)

// fakeAccess is a TopicAccess over a table of principal -> describable
// topics; every change bumps its version, as the node's ACLs do.
type fakeAccess struct {
	v     uint64
	allow map[string]map[string]bool
	calls int
}

func (a *fakeAccess) Version() uint64 { return a.v }

func (a *fakeAccess) CanDescribe(principal, host, topic string) bool {
	a.calls++
	return host == "127.0.0.1" && a.allow[principal][topic]
}

func (a *fakeAccess) set(principal string, ok bool, topics ...string) {
	if a.allow == nil {
		a.allow = map[string]map[string]bool{}
	}
	if a.allow[principal] == nil {
		a.allow[principal] = map[string]bool{}
	}
	for _, t := range topics {
		a.allow[principal][t] = ok
	}
	a.v++
}

// settleCG heartbeats the members (each with its principal) until none's
// answer changes anything, and returns their last answers.
func (h *h) settleCG(members map[string]string) map[string]tpset {
	h.t.Helper()
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Each member owns what it was last given (a revoked partition is
	// released at once).
	owned := map[string]tpset{}
	for _, id := range ids {
		owned[id] = h.cmember("cg", id).assigned.clone()
	}
	for range 10 {
		moved := false
		for _, id := range ids {
			m := h.cmember("cg", id)
			r := h.cg(hb{member: id, epoch: m.epoch, owned: owned[id], principal: members[id]})
			if r.ErrorCode != 0 {
				h.t.Fatalf("%s: heartbeat error %d", id, r.ErrorCode)
			}
			if r.Assignment != nil {
				owned[id] = assigned(r)
				moved = true
			}
			if r.MemberEpoch != m.epoch {
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	out := map[string]tpset{}
	for _, id := range ids {
		out[id] = h.cmember("cg", id).assigned
	}
	return out
}

// A SubscribedTopicRegex gives a member only the topics its principal may
// describe, as Kafka filters a regex's matches with the authorizer; a
// grant or a revocation reaches the member at its next heartbeat.
func TestRegexGivesOnlyDescribableTopics(t *testing.T) {
	acc := &fakeAccess{}
	acc.set("User:alice", true, "a")
	h, _ := newCH(t, map[string]int32{"a": 2, "b": 2, "c": 2}, func(c *Config) { c.TopicAccess = acc })
	regex := "a|b|c"
	r := h.cg(hb{member: "m1", regex: &regex, owned: tpset{}, principal: "User:alice"})
	if r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	who := map[string]string{"m1": "User:alice"}
	if got := h.settleCG(who)["m1"]; !got.equal(set("a", 0, 1)) {
		t.Fatalf("alice may describe only a, and was given %v", got)
	}
	if subs := h.cgroup("cg").subscribed(h.s.cfg.Topics); !slices.Equal(subs, []string{"a"}) {
		t.Errorf("the group counts %q as subscribed, want [a]", subs)
	}

	epoch := h.cgroup("cg").epoch
	acc.set("User:alice", true, "b")
	if got := h.settleCG(who)["m1"]; !got.equal(set("a", 0, 1).union(set("b", 0, 1))) {
		t.Fatalf("after granting b: given %v, want a and b", got)
	}
	if h.cgroup("cg").epoch == epoch {
		t.Error("a grant did not bump the group epoch")
	}
	acc.set("User:alice", false, "a")
	if got := h.settleCG(who)["m1"]; !got.equal(set("b", 0, 1)) {
		t.Fatalf("after revoking a: given %v, want b only", got)
	}

	// Who the member is counts, not what it asked for: the same member
	// heartbeating as another principal is given that principal's topics.
	if got := h.settleCG(map[string]string{"m1": "User:bob"})["m1"]; got.size() != 0 {
		t.Fatalf("as bob, who may describe nothing, m1 keeps %v", got)
	}
	if m := h.cmember("cg", "m1"); m.principal != "User:bob" {
		t.Fatalf("member principal %q, want User:bob", m.principal)
	}
}

// Members of one group authenticated as different principals are each
// given only what they may describe: a topic only one of them may see goes
// to that one.
func TestRegexFilteredPerMember(t *testing.T) {
	acc := &fakeAccess{}
	acc.set("User:alice", true, "a", "b")
	acc.set("User:bob", true, "a")
	h, _ := newCH(t, map[string]int32{"a": 4, "b": 4, "c": 4}, func(c *Config) { c.TopicAccess = acc })
	regex := ".*"
	who := map[string]string{"m1": "User:alice", "m2": "User:bob"}
	for _, id := range []string{"m1", "m2"} {
		if r := h.cg(hb{member: id, regex: &regex, owned: tpset{}, principal: who[id]}); r.ErrorCode != 0 {
			t.Fatal(r.ErrorCode)
		}
	}
	got := h.settleCG(who)
	if got["m1"].union(got["m2"]).size() != 8 {
		t.Fatalf("a and b are not all assigned: %v", got)
	}
	for tp := range got["m2"] {
		if tp != "a" {
			t.Fatalf("bob was given topic %s: %v", tp, got["m2"])
		}
	}
	if !got["m1"].has("b", 0) || got["m1"].has("c", 0) || got["m2"].has("c", 0) {
		t.Fatalf("assignment %v: b must go to alice, c to nobody", got)
	}
	h.checkNoDoubleOwner("cg")

	// The filtering is kept per regex, principal and host until the ACLs
	// or the matches change: a third member, authenticated as bob, joins
	// and the target is recomputed for all three without asking again.
	calls := acc.calls
	who["m3"] = "User:bob"
	if r := h.cg(hb{member: "m3", regex: &regex, owned: tpset{}, principal: "User:bob"}); r.ErrorCode != 0 {
		t.Fatal(r.ErrorCode)
	}
	got = h.settleCG(who)
	if acc.calls != calls {
		t.Errorf("a join under unchanged ACLs asked the authorizer %d more times", acc.calls-calls)
	}
	if got["m3"].size() == 0 || got["m3"].has("b", 0) || got["m3"].has("c", 0) {
		t.Fatalf("m3 (bob) given %v", got["m3"])
	}

	// Bob granted b, which alice already had: the union of the subscribed
	// topics is unchanged, but bob's share is not: a new target must be
	// computed with b among his topics.
	epoch := h.cgroup("cg").epoch
	acc.set("User:bob", true, "b")
	h.settleCG(who)
	if cg := h.cgroup("cg"); cg.epoch == epoch || cg.assignEpoch != cg.epoch {
		t.Fatalf("after granting bob b: group epoch %d (was %d), target epoch %d", cg.epoch, epoch, cg.assignEpoch)
	}
	if ts := h.cgroup("cg").memberTopics(h.cmember("cg", "m2"), h.s.cfg.Topics); !slices.Equal(ts, []string{"a", "b"}) {
		t.Fatalf("bob's topics for the assignor: %q", ts)
	}

	// The principal is stored with the member: a reloaded shard filters the
	// same way before the member heartbeats again.
	re := h.reload()
	m := re.groups["cg"].cg.members["m2"]
	if m.principal != "User:bob" {
		t.Fatalf("reloaded principal %q", m.principal)
	}
	acc.set("User:bob", false, "b")
	if ts := re.groups["cg"].cg.memberTopics(m, re.cfg.Topics); !slices.Equal(ts, []string{"a"}) {
		t.Fatalf("reloaded bob's topics %q, want [a]", ts)
	}
}

// Turning the filter on where it denies nothing keeps the group's hash: no
// new epoch, no rebalance, when a node restarts with an authorizer that
// allows what its members have.
func TestRegexFilterAllowingAllKeepsTheEpoch(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2, "b": 2})
	regex := "a|b"
	h.cg(hb{member: "m1", regex: &regex, owned: tpset{}, principal: "User:alice"})
	who := map[string]string{"m1": "User:alice"}
	h.settleCG(who)
	epoch, hash := h.cgroup("cg").epoch, h.cgroup("cg").hash
	acc := &fakeAccess{}
	acc.set("User:alice", true, "a", "b")
	h.s.cfg.TopicAccess = acc
	h.settleCG(who)
	if cg := h.cgroup("cg"); cg.epoch != epoch || cg.hash != hash {
		t.Fatalf("epoch %d -> %d, hash %x -> %x", epoch, cg.epoch, hash, cg.hash)
	}
	acc.set("User:alice", false, "b")
	if got := h.settleCG(who)["m1"]; !got.equal(set("a", 0, 1)) {
		t.Fatalf("after denying b: %v", got)
	}
}

// A member record written before the principal was stored decodes with no
// principal; one written now round-trips it.
func TestMemberRecordPrincipal(t *testing.T) {
	m := &cmember{id: "m1", clientID: "c", clientHost: "127.0.0.1", regex: "a.*", principal: "User:alice"}
	r := cMemberRec("g", m)
	rec := r.encodeConsumer()
	back, err := decodeConsumer(rec.Key, rec.Value)
	if err != nil || back.c.meta.principal != "User:alice" || back.c.meta.regex != "a.*" {
		t.Fatalf("round trip: %+v, %v", back.c.meta, err)
	}
	old := rec.Value[:len(rec.Value)-len(appendString(nil, m.principal))]
	back, err = decodeConsumer(rec.Key, old)
	if err != nil || back.c.meta.principal != "" || back.c.meta.regex != "a.*" {
		t.Fatalf("old record: %+v, %v", back.c.meta, err)
	}
}

// aclAccess is a TopicAccess over a real ACL set, as the node's.
type aclAccess struct {
	a acl.Authorizer
	s *acl.Set
	v uint64
}

func (x *aclAccess) Version() uint64 { return x.v }

func (x *aclAccess) CanDescribe(principal, host, topic string) bool {
	return x.a.Authorize(x.s, principal, host, acl.OpDescribe, acl.ResourceTopic, topic)
}

// BenchmarkRegexFilteredJoin measures BenchmarkRegexMemberJoin's join and
// leave (20 regex members over 1,000 topics) with the regexes filtered by
// ACLs: the 20 members are 4 principals, each allowed a prefix and denied
// one topic, among 100 other bindings; the regex matches 10 or all 1,000
// topics. "no-acl": the same without ACLs (the peer). "cached": the ACLs do not change, the filtering of every
// principal is kept. "acl-change": the ACLs change before every join, so the
// join filters every principal's matches again (what the first heartbeat
// after an ACL change costs).
func BenchmarkRegexFilteredJoin(b *testing.B) {
	topics := serviceTopics()
	var bs []acl.Binding
	for i := range 100 {
		bs = append(bs, acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: fmt.Sprintf("other-%d", i),
			PatternType: acl.PatternLiteral, Principal: "User:x", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow})
	}
	for p := range 4 {
		who := fmt.Sprintf("User:p%d", p)
		bs = append(bs,
			acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "service-", PatternType: acl.PatternPrefixed,
				Principal: who, Host: "*", Operation: acl.OpDescribe, Permission: acl.PermissionAllow},
			acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: fmt.Sprintf("service-00%d", p), PatternType: acl.PatternLiteral,
				Principal: who, Host: "*", Operation: acl.OpDescribe, Permission: acl.PermissionDeny})
	}
	for _, c := range []struct {
		name, regex string
		mode        string
	}{
		{"10-topics/no-acl", "service-00.*", "none"},
		{"10-topics/cached", "service-00.*", "cached"},
		{"10-topics/acl-change", "service-00.*", "change"},
		{"1000-topics/no-acl", "service-.*", "none"},
		{"1000-topics/cached", "service-.*", "cached"},
		{"1000-topics/acl-change", "service-.*", "change"},
	} {
		regex, change := c.regex, c.mode == "change"
		b.Run(c.name, func(b *testing.B) {
			acc := &aclAccess{s: acl.NewSet(bs)}
			h, _ := newCH(b, topics, func(cfg *Config) {
				if c.mode != "none" {
					cfg.TopicAccess = acc
				}
			})
			for i := range 20 {
				r := h.cg(hb{member: fmt.Sprintf("m%d", i), regex: &regex, owned: tpset{}, principal: fmt.Sprintf("User:p%d", i%4)})
				if r.ErrorCode != 0 {
					b.Fatal(r.ErrorCode)
				}
			}
			b.ResetTimer()
			for range b.N {
				if change {
					acc.v++
				}
				if r := h.cg(hb{member: "joiner", regex: &regex, owned: tpset{}, principal: "User:p0"}); r.ErrorCode != 0 {
					b.Fatal(r.ErrorCode)
				}
				h.cg(hb{member: "joiner", epoch: -1})
			}
		})
	}
}

// The rebalance history tells an ACL change as such: the group's new
// target follows the ACLs, not a created or deleted topic.
func TestRegexACLChangeInHistory(t *testing.T) {
	acc := &fakeAccess{}
	acc.set("User:alice", true, "a")
	h, _ := newCH(t, map[string]int32{"a": 2, "b": 2, "c": 2}, func(c *Config) { c.TopicAccess = acc })
	regex := "a|b|c"
	who := map[string]string{"m1": "User:alice"}
	h.cg(hb{member: "m1", regex: &regex, owned: tpset{}, principal: "User:alice"})
	h.settleCG(who)
	acc.set("User:alice", true, "b")
	h.settleCG(who)
	acc.set("User:alice", false, "a")
	h.settleCG(who)
	evs := h.s.History("cg")
	if len(evs) < 3 {
		t.Fatalf("%d events, want the join and two ACL changes", len(evs))
	}
	for i, want := range []struct {
		detail string
		topics []string
	}{
		{"the ACLs changed which topics the members' regexes give them: now given b", []string{"b"}},
		{"the ACLs changed which topics the members' regexes give them: no longer given a", []string{"a"}},
	} {
		c := evs[len(evs)-2+i].Cause
		if c.Kind != CauseTopicsChanged || c.Detail != want.detail || !slices.Equal(c.Topics, want.topics) {
			t.Errorf("event %d: cause %+v, want %q on %v", i, c, want.detail, want.topics)
		}
	}
	if s := h.checkReload(); s != "" {
		t.Error(s)
	}
}
