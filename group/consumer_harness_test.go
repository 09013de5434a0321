package group

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// newCH returns a harness whose shard assigns consumer groups from a fresh
// catalog holding topics (name -> partitions).
func newCH(t testing.TB, topics map[string]int32, mod ...func(*Config)) (*h, *catalog.Catalog) {
	t.Helper()
	cat := catalog.New(catalog.Options{})
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := cat.Create(n, topics[n], nil); err != nil {
			t.Fatal(err)
		}
	}
	h := newH(t, append([]func(*Config){func(c *Config) { c.Topics = cat }}, mod...)...)
	return h, cat
}

// hb is one ConsumerGroupHeartbeat as a test writes it. Nil slices and
// pointers are sent as null ("unchanged").
type hb struct {
	group, member string
	epoch         int32
	instance      *string
	rack          *string
	rebalance     int32 // ms; 0 means 60000 on a join, -1 (unchanged) otherwise
	names         []string
	regex         *string
	assignor      *string
	owned         tpset // nil = null
	v0            bool  // send version 0 (default 1)
	principal     string
}

func (h *h) cgReq(o hb) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	if o.v0 {
		req.Version = 0
	}
	if o.group == "" {
		o.group = "cg"
	}
	req.Group, req.MemberID, req.MemberEpoch = o.group, o.member, o.epoch
	req.InstanceID, req.RackID, req.SubscribedTopicRegex, req.ServerAssignor = o.instance, o.rack, o.regex, o.assignor
	req.SubscribedTopicNames = o.names
	switch {
	case o.rebalance != 0:
		req.RebalanceTimeoutMillis = o.rebalance
	case o.epoch == 0:
		req.RebalanceTimeoutMillis = 60000
	default:
		req.RebalanceTimeoutMillis = -1
	}
	if o.owned != nil {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range o.owned.topics() {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = catalog.TopicID(t), o.owned[t]
			req.Topics = append(req.Topics, rt)
		}
	}
	return req
}

// cg sends a heartbeat and returns its answer (writes complete at once
// unless held).
func (h *h) cg(o hb) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	req := h.cgReq(o)
	tk := h.do(func(t Ticket, out *Output) {
		h.s.ConsumerGroupHeartbeat(h.now, t, Client{ID: "client-" + o.member, Host: "127.0.0.1", Principal: o.principal}, req, out)
	})
	return h.resp(tk).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// join sends a first heartbeat (epoch 0, owned []) subscribing to names.
func (h *h) cgJoin(member string, names ...string) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if names == nil {
		names = []string{}
	}
	return h.cg(hb{member: member, names: names, owned: tpset{}})
}

// assigned decodes a heartbeat answer's assignment into a tpset (nil if the
// answer carried none).
func assigned(r *kmsg.ConsumerGroupHeartbeatResponse) tpset {
	if r.Assignment == nil {
		return nil
	}
	s := tpset{}
	for _, t := range r.Assignment.Topics {
		name := ""
		for _, n := range []string{"a", "b", "c", "t", "foo1", "xfoo1", "new", "other"} {
			if catalog.TopicID(n) == t.TopicID {
				name = n
			}
		}
		for _, p := range t.Partitions {
			s.add(name, p)
		}
	}
	return s
}

// member returns the shard's member state (nil if absent).
func (h *h) cmember(group, id string) *cmember {
	g := h.s.Group(group)
	if g == nil || g.cg == nil {
		return nil
	}
	return g.cg.members[id]
}

func (h *h) cgroup(group string) *consumerGroup {
	if g := h.s.Group(group); g != nil {
		return g.cg
	}
	return nil
}

// set builds a tpset from "topic", partitions... pairs: set("a", 0, 1).
func set(topic string, ps ...int32) tpset {
	s := tpset{}
	for _, p := range ps {
		s.add(topic, p)
	}
	return s
}

func expectCode(t testing.TB, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: error %d, want %d", what, got, want)
	}
}

func (h *h) checkNoDoubleOwner(group string) {
	h.t.Helper()
	if d := doubleOwner(h.cgroup(group)); d != "" {
		h.t.Fatal(d)
	}
}

// doubleOwner describes a partition of cg held (assigned or pending) by two
// members, or returns "" when there is none.
func doubleOwner(cg *consumerGroup) string {
	if cg == nil {
		return ""
	}
	seen := map[topicPartition]string{}
	for _, id := range cg.ids {
		m := cg.members[id]
		for _, s := range []tpset{m.assigned, m.pending} {
			for _, t := range s.topics() {
				for _, p := range s[t] {
					tp := topicPartition{t, p}
					if o, ok := seen[tp]; ok && o != id {
						return fmt.Sprintf("%s/%d held by %s and %s", t, p, o, id)
					}
					seen[tp] = id
				}
			}
		}
	}
	return ""
}

var _ = time.Second
