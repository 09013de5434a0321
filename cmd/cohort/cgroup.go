package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cohort-dev/cohort/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer groups: the groups of the KIP-848 consumer protocol
// (ConsumerGroupHeartbeat), which DescribeGroups answers as missing and
// ConsumerGroupDescribe describes.

// hasConsumerDescribe reports whether the server answers
// ConsumerGroupDescribe, from its ApiVersions. If ApiVersions itself fails,
// it says yes: the describe request then reports the failure.
func hasConsumerDescribe(ctx context.Context, cl *kgo.Client) bool {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		return true
	}
	key := kmsg.NewPtrConsumerGroupDescribeRequest().Key()
	return slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == key })
}

// describeConsumerGroups describes ids with ConsumerGroupDescribe (each at
// its coordinator) into byID, or their errors into errs, and returns the
// ids that are not consumer groups there (GROUP_ID_NOT_FOUND, or
// UNSUPPORTED_VERSION from a coordinator without the request), to be
// described as classic groups.
func describeConsumerGroups(ctx context.Context, cl *kgo.Client, ids []string, byID map[string]*groupDesc, errs map[string]error) []string {
	var classic []string
	fallBack := func(err error) bool {
		return errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, kerr.UnsupportedVersion)
	}
	var shards []kgo.ResponseShard
	inBatches(ids, func(batch []string) {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = batch
		shards = append(shards, cl.RequestSharded(ctx, req)...)
	})
	for _, sh := range shards {
		if sh.Err != nil {
			for _, id := range sh.Req.(*kmsg.ConsumerGroupDescribeRequest).Groups {
				if fallBack(sh.Err) {
					classic = append(classic, id)
				} else {
					errs[id] = sh.Err
				}
			}
			continue
		}
		coord := &nodeJSON{NodeID: sh.Meta.NodeID, Host: sh.Meta.Host, Port: sh.Meta.Port}
		resp := sh.Resp.(*kmsg.ConsumerGroupDescribeResponse)
		for i := range resp.Groups {
			rg := &resp.Groups[i]
			err := kerr.ErrorForCode(rg.ErrorCode)
			switch {
			case fallBack(err):
				classic = append(classic, rg.Group)
			case err != nil:
				if rg.ErrorMessage != nil {
					err = withMessage(err, *rg.ErrorMessage)
				}
				errs[rg.Group] = err
			case rg.State == "Dead":
				errs[rg.Group] = errNoGroup
			default:
				byID[rg.Group] = newConsumerDesc(rg, coord)
			}
		}
	}
	return classic
}

// newConsumerDesc converts one group of a ConsumerGroupDescribe answer.
func newConsumerDesc(rg *kmsg.ConsumerGroupDescribeResponseGroup, coord *nodeJSON) *groupDesc {
	g := &groupDesc{Group: rg.Group, Coordinator: coord, State: rg.State, Type: "consumer", ProtocolType: "consumer",
		GroupEpoch: ptr(rg.Epoch), AssignmentEpoch: ptr(rg.AssignmentEpoch), Assignor: ptr(rg.AssignorName),
		MemberCount: len(rg.Members), Members: []memberDesc{}, Offsets: []offsetRow{}}
	for _, rm := range rg.Members {
		m := memberDesc{MemberID: rm.MemberID, InstanceID: rm.InstanceID, ClientID: rm.ClientID,
			Host: strings.TrimPrefix(rm.ClientHost, "/"), Rack: rm.RackID, MemberEpoch: ptr(rm.MemberEpoch),
			MemberType: memberType(rm.MemberType), SubscribedTopics: slices.Sorted(slices.Values(rm.SubscribedTopics)),
			SubscribedTopicRegex: rm.SubscribedTopicRegex,
			Assignment:           fromAssignment(rm.Assignment), Target: fromAssignment(rm.TargetAssignment)}
		if m.SubscribedTopics == nil {
			m.SubscribedTopics = []string{}
		}
		// A cohort node gives what the member still has to revoke in a
		// tag (ConsumerGroupDescribe's assignment leaves it out, as
		// Kafka's does): CURRENT is what it holds, that included. Without
		// the tag (another server, or an older cohort that counted those
		// partitions in the assignment), what is not in the target.
		if revoking, ok := group.RevokingOf(&rm); ok {
			for _, r := range revoking {
				m.Revoking = append(m.Revoking, topicPartitions{Topic: r.Topic, Partitions: r.Partitions})
			}
			m.Revoking = sortTopicPartitions(m.Revoking)
			m.Assignment = union(m.Assignment, m.Revoking)
		} else {
			m.Revoking = minus(m.Assignment, m.Target)
		}
		m.setLastHeard(group.ConsumerLastHeardOf(&rm))
		g.Members = append(g.Members, m)
	}
	slices.SortFunc(g.Members, func(a, b memberDesc) int { return strings.Compare(a.MemberID, b.MemberID) })
	return g
}

// memberType names ConsumerGroupDescribe's MemberType (v1+; v0 answers -1).
func memberType(t int8) string {
	switch t {
	case 0:
		return "classic"
	case 1:
		return "consumer"
	}
	return "unknown"
}

// fromAssignment lists an assignment of ConsumerGroupDescribe by topic
// name (the topic id when the name is missing), topics and partitions
// sorted; never nil.
func fromAssignment(a kmsg.Assignment) []topicPartitions {
	out := []topicPartitions{}
	for _, t := range a.TopicPartitions {
		name := t.Topic
		if name == "" {
			name = fmt.Sprintf("%x", t.TopicID)
		}
		out = append(out, topicPartitions{Topic: name, Partitions: slices.Clone(t.Partitions)})
	}
	return sortTopicPartitions(out)
}

// sortTopicPartitions sorts tps by topic and each topic's partitions, and
// returns it.
func sortTopicPartitions(tps []topicPartitions) []topicPartitions {
	for _, t := range tps {
		slices.Sort(t.Partitions)
	}
	slices.SortFunc(tps, func(a, b topicPartitions) int { return strings.Compare(a.Topic, b.Topic) })
	return tps
}

// minus is the partitions of a that are not in b (both sorted), never nil.
func minus(a, b []topicPartitions) []topicPartitions {
	out := []topicPartitions{}
	for _, t := range a {
		i := slices.IndexFunc(b, func(x topicPartitions) bool { return x.Topic == t.Topic })
		var ps []int32
		for _, p := range t.Partitions {
			if i < 0 || !slices.Contains(b[i].Partitions, p) {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			out = append(out, topicPartitions{Topic: t.Topic, Partitions: ps})
		}
	}
	return out
}

// union is a with b's partitions added, topics and partitions sorted.
func union(a, b []topicPartitions) []topicPartitions {
	by := map[string][]int32{}
	for _, l := range [][]topicPartitions{a, b} {
		for _, t := range l {
			for _, p := range t.Partitions {
				if !slices.Contains(by[t.Topic], p) {
					by[t.Topic] = append(by[t.Topic], p)
				}
			}
		}
	}
	out := []topicPartitions{}
	for _, topic := range slices.Sorted(maps.Keys(by)) {
		out = append(out, topicPartitions{Topic: topic, Partitions: slices.Sorted(slices.Values(by[topic]))})
	}
	return out
}

// subscriptionText is the SUBSCRIPTION column: the topics, comma-separated,
// and the regex as regex:PATTERN.
func (m memberDesc) subscriptionText() string {
	var parts []string
	if len(m.SubscribedTopics) > 0 {
		topics := make([]string, len(m.SubscribedTopics))
		for i, t := range m.SubscribedTopics {
			topics[i] = cell(t)
		}
		parts = append(parts, strings.Join(topics, ","))
	}
	if m.SubscribedTopicRegex != nil && *m.SubscribedTopicRegex != "" {
		parts = append(parts, "regex:"+cell(*m.SubscribedTopicRegex))
	}
	return strOrDash(strings.Join(parts, " "))
}

// byType splits descs into classic and consumer groups, keeping their order.
func byType(descs []*groupDesc) (classic, consumer []*groupDesc) {
	for _, g := range descs {
		if g.Type == "consumer" {
			consumer = append(consumer, g)
		} else {
			classic = append(classic, g)
		}
	}
	return classic, consumer
}
