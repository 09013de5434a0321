package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/security/acl"
)

// A group named again and again in one DescribeGroups, ConsumerGroupDescribe
// or OffsetFetch (v8+), or a partition listed again and again, is answered
// once: each answer can carry megabytes (member metadata and assignments,
// 4 KiB of metadata per committed offset), so answering every mention let
// a request of a few hundred bytes make one of hundreds of megabytes (a
// DescribeGroups of one group named 100 times: 200 MiB). OffsetFetch
// entries of one group are merged: every partition any of them asked for,
// all of them when one asks for all.
func TestRepeatedEntriesAnsweredOnce(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("t", 4)
	e.ensureTopic("u", 4)
	e.commit("g", "t", 7)
	e.commit("g", "u", 9)
	e.commit("h", "t", 3)

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 5, []string{"g", "h", "g", "g", "h"}
	if resp := e.as(admin, dg).(*kmsg.DescribeGroupsResponse); len(resp.Groups) != 2 || resp.Groups[0].Group != "g" || resp.Groups[1].Group != "h" {
		t.Errorf("DescribeGroups: %d answers %+v, want g then h once each", len(resp.Groups), resp.Groups)
	}

	cg := kmsg.NewPtrConsumerGroupDescribeRequest()
	cg.Groups = []string{"c", "c", "c"}
	if resp := e.as(admin, cg).(*kmsg.ConsumerGroupDescribeResponse); len(resp.Groups) != 1 || resp.Groups[0].Group != "c" {
		t.Errorf("ConsumerGroupDescribe: %d answers, want one", len(resp.Groups))
	}

	// Three entries of g (u/0 twice, t/0, then t/0 four times, one
	// of them twice over) and one of h asking for all: g answered
	// once with u/0 and t/0, each once.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version = 8
	entry := func(grp string, topics ...kmsg.OffsetFetchRequestGroupTopic) kmsg.OffsetFetchRequestGroup {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.Topics = grp, topics
		return g
	}
	topic := func(name string, ps ...int32) kmsg.OffsetFetchRequestGroupTopic {
		return kmsg.OffsetFetchRequestGroupTopic{Topic: name, Partitions: ps}
	}
	of.Groups = []kmsg.OffsetFetchRequestGroup{
		entry("g", topic("u", 0, 0)),
		entry("h"),
		entry("g", topic("t", 0)),
		entry("g", topic("t", 0, 0), topic("t", 0, 0)),
	}
	of.Groups[1].Topics = nil // all of h's
	resp := e.as(admin, of).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 2 {
		t.Fatalf("OffsetFetch: %d group answers %+v, want 2", len(resp.Groups), resp.Groups)
	}
	got := map[string]int64{}
	n := 0
	for _, g := range resp.Groups {
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				got[g.Group+"/"+tp.Topic] = p.Offset
				n++
			}
		}
	}
	if n != 3 || got["g/u"] != 9 || got["g/t"] != 7 || got["h/t"] != 3 {
		t.Errorf("OffsetFetch: %d partition answers %v, want g/u 9, g/t 7, h/t 3 once each", n, got)
	}

	// One entry asking for all of g's, one for a partition of it: all.
	of.Groups = []kmsg.OffsetFetchRequestGroup{entry("g", topic("t", 0)), entry("g")}
	of.Groups[1].Topics = nil
	resp = e.as(admin, of).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 2 {
		t.Errorf("OffsetFetch with an all-topics entry: %+v, want g once with both topics", resp.Groups)
	}

	// Before v8 (one group): a partition listed twice is answered once.
	old := kmsg.NewPtrOffsetFetchRequest()
	old.Version, old.Group = 7, "g"
	old.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 0, 0, 1}}}
	r7 := e.as(admin, old).(*kmsg.OffsetFetchResponse)
	if len(r7.Topics) != 1 || len(r7.Topics[0].Partitions) != 2 {
		t.Errorf("OffsetFetch v7: %+v, want t/0 and t/1 once each", r7.Topics)
	}
}

// TestRepeatedPartitionsRefusedOnce: a partition the server answers itself
// (a topic the principal may not describe, a topic ID no topic has) is
// answered once too, however often and in however many entries the request
// lists it, at every version.
func TestRepeatedPartitionsRefusedOnce(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("cat-a", 2)
	e.ensureTopic("hidden", 2)
	e.commit("g", "cat-a", 5)
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceGroup, "g"), allow(alice, acl.OpDescribe, acl.ResourceTopic, "cat-a"))
	twice := func(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchRequest {
		for i := range req.Topics {
			req.Topics[i].Partitions = []int32{0, 0, 1, 0}
		}
		for i := range req.Groups {
			for j := range req.Groups[i].Topics {
				req.Groups[i].Topics[j].Partitions = []int32{0, 0, 1, 0}
			}
		}
		return req
	}
	for _, tc := range []struct {
		who  string
		req  *kmsg.OffsetFetchRequest
		want string
	}{
		{alice, twice(offsetFetch(7, "g", []string{"hidden", "cat-a", "hidden"})), "hidden/0=-1:29 hidden/1=-1:29 cat-a/0=5:0 cat-a/1=-1:0"},
		{alice, twice(offsetFetch(8, "g", []string{"hidden", "cat-a", "hidden"})), "hidden/0=-1:29 hidden/1=-1:29 cat-a/0=5:0 cat-a/1=-1:0"},
		{admin, onWire(t, twice(offsetFetch(10, "g", []string{"gone", "cat-a", "gone"}))), "gone/0=-1:100 gone/1=-1:100 cat-a/0=5:0 cat-a/1=-1:0"},
	} {
		// The same group twice more, listing the same topics again.
		if tc.req.Version >= 8 {
			tc.req.Groups = append(tc.req.Groups, tc.req.Groups[0], tc.req.Groups[0])
		}
		resp := e.as(tc.who, tc.req).(*kmsg.OffsetFetchResponse)
		if got := fetchSummary(resp); got != tc.want {
			t.Errorf("v%d as %s: %s, want %s", tc.req.Version, tc.who, got, tc.want)
		}
	}
}

// TestCreateTopicsPastThePartitionLimit: topics that would take the
// catalog past its bound on all partitions (node --max-partitions) are
// refused POLICY_VIOLATION with the reason, the others of the request
// created in order; validate-only reports the same; growing past it too.
func TestCreateTopicsPastThePartitionLimit(t *testing.T) {
	cat := catalog.New(catalog.Options{MaxTotalPartitions: 10})
	e := newAuthzEnv(t, func(c *Config) { c.Catalog = cat })
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, tc := range []struct {
		name string
		n    int32
	}{{"a", 6}, {"b", 5}, {"c", 4}} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, tc.n, 1
		req.Topics = append(req.Topics, rt)
	}
	for _, validate := range []bool{true, false} {
		req.ValidateOnly = validate
		resp := e.as(admin, req).(*kmsg.CreateTopicsResponse)
		var got []string
		for _, rt := range resp.Topics {
			got = append(got, fmt.Sprintf("%s=%d", rt.Topic, rt.ErrorCode))
		}
		// Validation counts the topics before each, as the creation does:
		// both refuse b, whose partitions with a's pass the bound.
		want := "[a=0 b=44 c=0]"
		if m := resp.Topics[1].ErrorMessage; m == nil || !strings.Contains(*m, "--max-partitions") || resp.Topics[1].NumPartitions != -1 {
			t.Errorf("validate=%v: b's refusal: %v, %d partitions", validate, m, resp.Topics[1].NumPartitions)
		}
		if resp.Topics[0].TopicID != catalog.TopicID("a") || resp.Topics[2].NumPartitions != 4 {
			t.Errorf("validate=%v: answers: %+v", validate, resp.Topics)
		}
		if _, created := cat.Lookup("a"); created == validate {
			t.Errorf("validate=%v: topic a created: %v", validate, created)
		}
		if fmt.Sprint(got) != want {
			t.Errorf("validate=%v: %v, want %s", validate, got, want)
		}
	}
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "c", Count: 5}}
	if resp := e.as(admin, grow).(*kmsg.CreatePartitionsResponse); resp.Topics[0].ErrorCode != 44 {
		t.Errorf("growing past the limit: %d, want POLICY_VIOLATION", resp.Topics[0].ErrorCode)
	}
}
