package server

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/security/acl"
)

// onWire returns req as the server reads it off the wire: encoded at its
// version and decoded again, so that a v10 request names no topic.
func onWire[R kmsg.Request](t *testing.T, req R) R {
	t.Helper()
	got := kmsg.RequestForKey(req.Key())
	got.SetVersion(req.GetVersion())
	if err := got.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return got.(R)
}

// commitIDs lists the topic IDs of a commit's answer, as the names the
// request builders gave them.
func commitIDs(resp *kmsg.OffsetCommitResponse) string {
	var out []string
	for _, t := range resp.Topics {
		out = append(out, topicOf("", t.TopicID))
	}
	return fmt.Sprint(out)
}

func TestOffsetCommitByTopicID(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("cat-a", 2)
	e.ensureTopic("cat-b", 1)

	// Known IDs are committed by name; an ID outside the catalog and the
	// zero ID are UNKNOWN_TOPIC_ID; a partition the topic does not have
	// is still UNKNOWN_TOPIC_OR_PARTITION. Every answer carries its
	// request topic's ID, in request order.
	req := commitReq(10, "g", "cat-a:0,1", "gone:0", "cat-b:0,4")
	zero := kmsg.NewOffsetCommitRequestTopic()
	zero.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}
	req.Topics = append(req.Topics, zero)
	resp := e.as(admin, onWire(t, req)).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), "cat-a/0=0 cat-a/1=0 gone/0=100 cat-b/0=0 cat-b/4=3 /0=100"; got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
	if got, want := commitIDs(resp), "[cat-a gone cat-b ]"; got != want {
		t.Errorf("answered IDs %s, want %s", got, want)
	}
	if e.groups.mentions("gone") {
		t.Error("the coordinator was asked about the unknown ID")
	}
	if got := e.committed("g"); fmt.Sprint(got) != "map[cat-a:7 cat-b:7]" {
		t.Errorf("committed %v", got)
	}

	// Only unknown IDs: the coordinator is not asked.
	e.groups.reset()
	resp = e.as(admin, onWire(t, commitReq(10, "g", "gone:0,1"))).(*kmsg.OffsetCommitResponse)
	if got := commitCodes(resp); got != "gone/0=100 gone/1=100" || e.groups.count() != 0 {
		t.Errorf("only unknown IDs: %s, coordinator asked %d times", got, e.groups.count())
	}

	// The group's READ comes first: refused, every topic says so, known
	// or not. Then, by ID, a topic alice may not DESCRIBE is an unknown
	// ID (its existence is not revealed: security.md, "Topic IDs"), and
	// one she may describe but not READ is TOPIC_AUTHORIZATION_FAILED.
	e.ensureTopic("cat-c", 1)
	e.grant(allow(alice, acl.OpRead, acl.ResourceTopic, "cat-a"))
	e.groups.reset()
	resp = e.as(alice, onWire(t, commitReq(10, "g", "cat-a:0", "gone:0"))).(*kmsg.OffsetCommitResponse)
	if got := commitCodes(resp); got != "cat-a/0=30 gone/0=30" || e.groups.count() != 0 {
		t.Errorf("group refused: %s, coordinator asked %d times", got, e.groups.count())
	}
	e.grant(allow(alice, acl.OpRead, acl.ResourceGroup, "g"), allow(alice, acl.OpRead, acl.ResourceTopic, "cat-a"),
		allow(alice, acl.OpDescribe, acl.ResourceTopic, "cat-c"))
	e.groups.reset()
	resp = e.as(alice, onWire(t, commitReq(10, "g", "cat-b:0", "gone:0", "cat-c:0", "cat-a:1"))).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), "cat-b/0=100 gone/0=100 cat-c/0=29 cat-a/1=0"; got != want {
		t.Errorf("topics refused: %s, want %s", got, want)
	}
	if got, want := commitIDs(resp), "[cat-b gone cat-c cat-a]"; got != want {
		t.Errorf("answered IDs %s, want %s", got, want)
	}
	if e.groups.mentions("cat-b") || e.groups.mentions("cat-c") {
		t.Error("the coordinator was asked about a refused topic")
	}
}

func TestOffsetFetchByTopicID(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("cat-a", 1)
	e.ensureTopic("cat-b", 1)
	e.commit("g", "cat-a", 5)
	e.commit("g", "cat-b", 6)
	e.commit("g", "outside", 8) // by name (v8): a topic outside the catalog
	e.commit("h", "cat-b", 9)

	// Listed topics: known IDs answered by ID, an unknown one
	// UNKNOWN_TOPIC_ID with no offset, in request order.
	resp := e.as(admin, onWire(t, offsetFetch(10, "g", []string{"cat-b", "gone", "cat-a"}))).(*kmsg.OffsetFetchResponse)
	if got, want := fetchSummary(resp), "cat-b/0=6:0 gone/0=-1:100 cat-a/0=5:0"; got != want {
		t.Errorf("listed: %s, want %s", got, want)
	}
	for _, g := range resp.Groups {
		for _, tp := range g.Topics {
			if tp.Topic != "" {
				t.Errorf("v10 answer names topic %q", tp.Topic)
			}
		}
	}
	if e.groups.mentions("gone") {
		t.Error("the coordinator was asked about the unknown ID")
	}

	// All topics: the catalog's, by ID; the one outside it cannot be
	// named at v10 and is left out (v9 still has it).
	resp = e.as(admin, onWire(t, offsetFetch(10, "g", nil))).(*kmsg.OffsetFetchResponse)
	if got, want := fetchSummary(resp), "cat-a/0=5:0 cat-b/0=6:0"; got != want {
		t.Errorf("all: %s, want %s", got, want)
	}
	if got := e.committed("g"); got["outside"] != 8 {
		t.Errorf("v9 all topics: %v", got)
	}

	// Only unknown IDs listed: still a listed request (not "all topics"),
	// so nothing else is revealed; two groups, each with its own IDs.
	req := offsetFetch(10, "g", []string{"gone"})
	req.Groups = append(req.Groups, offsetFetch(10, "h", []string{"cat-b", "gone"}).Groups[0])
	resp = e.as(admin, onWire(t, req)).(*kmsg.OffsetFetchResponse)
	if got, want := fetchSummary(resp), "gone/0=-1:100 cat-b/0=9:0 gone/0=-1:100"; got != want {
		t.Errorf("two groups: %s, want %s", got, want)
	}
	if len(resp.Groups) != 2 || resp.Groups[0].Group != "g" || resp.Groups[1].Group != "h" {
		t.Errorf("groups %+v", resp.Groups)
	}

	// A group-level error stands alone: no topic is answered with it. A
	// topic alice may not describe, asked for by ID, is an unknown ID.
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "h"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "cat-b"))
	req = offsetFetch(10, "g", []string{"cat-a", "gone"})
	req.Groups = append(req.Groups, offsetFetch(10, "h", []string{"gone", "cat-b", "cat-a"}).Groups[0])
	e.groups.reset()
	resp = e.as(alice, onWire(t, req)).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 2 || resp.Groups[0].ErrorCode != codeGroupAuthz || len(resp.Groups[0].Topics) != 0 {
		t.Fatalf("refused group: %+v", resp.Groups)
	}
	if got, want := fetchSummary(resp), "gone/0=-1:100 cat-b/0=9:0 cat-a/0=-1:100"; got != want {
		t.Errorf("allowed group: %s, want %s", got, want)
	}
	if e.groups.mentions("cat-a") {
		t.Error("the coordinator was asked about a topic alice may not describe")
	}
}

// TestByTopicIDRepeatedTopics: a topic listed twice is answered once (a
// coordinator answers a repeated topic once, each partition of every copy
// once), also when an unknown ID or a refused topic sits between the copies.
func TestByTopicIDRepeatedTopics(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("cat-a", 2)
	e.ensureTopic("hidden", 1)
	e.commit("g", "cat-a", 5)
	resp := e.as(admin, onWire(t, offsetFetch(10, "g", []string{"cat-a", "gone", "cat-a"}))).(*kmsg.OffsetFetchResponse)
	if got, want := fetchSummary(resp), "cat-a/0=5:0 gone/0=-1:100"; got != want {
		t.Errorf("v10 fetch: %s, want %s", got, want)
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "cat-a"))
	resp = e.as(alice, offsetFetch(9, "g", []string{"cat-a", "hidden", "cat-a"})).(*kmsg.OffsetFetchResponse)
	if got, want := fetchSummary(resp), "cat-a/0=5:0 hidden/0=-1:29"; got != want {
		t.Errorf("v9 fetch, refused topic between copies: %s, want %s", got, want)
	}
}

// countingAuthorizer counts Authorize calls.
type countingAuthorizer struct {
	aclAuthorizer
	n atomic.Int64
}

func (z *countingAuthorizer) Authorize(principal, host string, op acl.Operation, rt acl.ResourceType, name string) bool {
	z.n.Add(1)
	return z.aclAuthorizer.Authorize(principal, host, op, rt, name)
}

// TestByTopicIDACLChecks: a v10 commit or fetch the ACLs allow makes as
// many ACL checks as the same request by name, and a topic refused by ID is
// counted as one denial, as by name.
func TestByTopicIDACLChecks(t *testing.T) {
	z := &countingAuthorizer{aclAuthorizer: aclAuthorizer{a: acl.Authorizer{}}}
	reg := prometheus.NewRegistry()
	e := newAuthzEnv(t, withRegistry(reg), func(c *Config) { c.Security = &Security{Authorizer: z} })
	for _, n := range []string{"t1", "t2", "t3", "hidden"} {
		e.ensureTopic(n, 1)
	}
	z.set.Store(acl.NewSet([]acl.Binding{allow(alice, acl.OpRead, acl.ResourceGroup, "g"), allow(alice, acl.OpRead, acl.ResourceTopic, "t1"),
		allow(alice, acl.OpRead, acl.ResourceTopic, "t2"), allow(alice, acl.OpRead, acl.ResourceTopic, "t3")}))
	checks := func(req kmsg.Request) int64 {
		z.n.Store(0)
		e.as(alice, req)
		return z.n.Load()
	}
	for _, pair := range [][2]kmsg.Request{
		{commitReq(9, "g", "t1:0", "t2:0", "t3:0"), onWire(t, commitReq(10, "g", "t1:0", "t2:0", "t3:0"))},
		{offsetFetch(9, "g", []string{"t1", "t2", "t3"}), onWire(t, offsetFetch(10, "g", []string{"t1", "t2", "t3"}))},
	} {
		if byName, byID := checks(pair[0]), checks(pair[1]); byID != byName {
			t.Errorf("%s: %d ACL checks by ID, %d by name", kmsg.NameForKey(pair[0].Key()), byID, byName)
		}
	}
	denials := func() float64 {
		return testutil.ToFloat64(e.srv.metrics.authz.denials[keyOffsetCommit])
	}
	before := denials()
	resp := e.as(alice, onWire(t, commitReq(10, "g", "t1:0", "hidden:0"))).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), "t1/0=0 hidden/0=100"; got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
	if d := denials() - before; d != 1 {
		t.Errorf("%v denials counted, want 1", d)
	}
}
