package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// groupDesc is one group as "group describe" and "offsets ID" show it; its
// JSON form is the schema of docs/cli.md.
type groupDesc struct {
	Group       string    `json:"group"`
	Coordinator *nodeJSON `json:"coordinator"`
	State       string    `json:"state"`
	// Type is "classic" (described with DescribeGroups) or "consumer"
	// (KIP-848, described with ConsumerGroupDescribe).
	Type         string  `json:"type"`
	ProtocolType string  `json:"protocol_type"`
	Protocol     string  `json:"protocol"`   // classic groups; "" for consumer groups (see Assignor)
	Generation   *int32  `json:"generation"` // null from a peer that is not cohort, and for consumer groups
	Leader       *string `json:"leader"`     // null likewise; "" without a leader
	// GroupEpoch, AssignmentEpoch and Assignor are a consumer group's
	// (null for classic groups): the group epoch, the epoch of the target
	// assignment, and the server-side assignor it uses.
	GroupEpoch      *int32       `json:"group_epoch"`
	AssignmentEpoch *int32       `json:"assignment_epoch"`
	Assignor        *string      `json:"assignor"`
	MemberCount     int          `json:"member_count"`
	Members         []memberDesc `json:"members"`
	Offsets         []offsetRow  `json:"offsets"`
	TotalLag        *int64       `json:"total_lag"` // null without --data-bootstrap
	// Error is why the group could not be described (then every other
	// field but Group is null); null for a group described.
	Error *string `json:"error"`
}

// nodeJSON is the node that coordinates a group (found with FindCoordinator).
type nodeJSON struct {
	NodeID int32  `json:"node_id"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
}

func (n *nodeJSON) String() string {
	if n == nil {
		return "-"
	}
	return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) + " (node " + strconv.Itoa(int(n.NodeID)) + ")"
}

// memberDesc is one member of a group.
type memberDesc struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
	// Assignment is what the member holds: in a classic group the decoded
	// assignment of the consumer protocol type (null for other protocol
	// types, or when it does not decode); in a consumer group its current
	// assignment, including the partitions it still has to revoke.
	// AssignmentBytes is the encoded size of a classic assignment (0 in a
	// consumer group).
	Assignment      []topicPartitions `json:"assignment"`
	AssignmentBytes int               `json:"assignment_bytes"`
	// The fields of consumer-group members (null in classic groups but
	// member_type, "classic" there): rack, member epoch, member type
	// ("consumer", "classic", or "unknown" from a v0 answer), subscription,
	// the partitions of Assignment not in the target (still to revoke),
	// and the target assignment.
	Rack                 *string           `json:"rack"`
	MemberEpoch          *int32            `json:"member_epoch"`
	MemberType           string            `json:"member_type"`
	SubscribedTopics     []string          `json:"subscribed_topics"`
	SubscribedTopicRegex *string           `json:"subscribed_topic_regex"`
	Revoking             []topicPartitions `json:"revoking"`
	Target               []topicPartitions `json:"target_assignment"`
	// LastHeardMsAgo and SessionTimeoutMs come from cohort's tag on the
	// member (group.LastHeardTag): how long ago the coordinator last heard
	// from it and its session timeout (null from a server without the
	// tag). Parked: a JoinGroup or SyncGroup of the member is waiting at
	// the coordinator, so it counts as alive and its session does not run.
	LastHeardMsAgo   *int64 `json:"last_heard_ms_ago"`
	SessionTimeoutMs *int64 `json:"session_timeout_ms"`
	Parked           bool   `json:"parked"`
}

// setLastHeard fills m's last-heard fields from cohort's tag (ok false: a
// server without it, and they stay null).
func (m *memberDesc) setLastHeard(l group.LastHeard, ok bool) {
	if !ok {
		return
	}
	m.LastHeardMsAgo, m.SessionTimeoutMs, m.Parked = ptr(l.Silent.Milliseconds()), ptr(l.Session.Milliseconds()), l.Parked
}

// lastHeard is m's last-heard fields as the group package has them; ok is
// false without them.
func (m memberDesc) lastHeard() (group.LastHeard, bool) {
	if m.LastHeardMsAgo == nil || m.SessionTimeoutMs == nil {
		return group.LastHeard{}, false
	}
	return group.LastHeard{Silent: time.Duration(*m.LastHeardMsAgo) * time.Millisecond,
		Session: time.Duration(*m.SessionTimeoutMs) * time.Millisecond, Parked: m.Parked}, true
}

// lastHeardText is the LAST-HEARD column: "32s ago of 45s" (the session
// timeout), "parked of 45s" while a JoinGroup or SyncGroup of the member
// waits at the coordinator, "-" from a server that does not say.
func (m memberDesc) lastHeardText() string {
	l, ok := m.lastHeard()
	switch {
	case !ok:
		return "-"
	case l.Parked:
		return "parked of " + compactDur(l.Session.Milliseconds())
	}
	return compactDur(l.Silent.Milliseconds()) + " ago of " + compactDur(l.Session.Milliseconds())
}

// topicPartitions is a topic and some of its partitions.
type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// partitionCount is the PARTITIONS column: how many partitions the member
// is assigned, "-" when the assignment is not a consumer one.
func (m memberDesc) partitionCount() string {
	if m.Assignment == nil {
		return "-"
	}
	n := 0
	for _, t := range m.Assignment {
		n += len(t.Partitions)
	}
	return strconv.Itoa(n)
}

// assignmentText is the ASSIGNMENT column: topic(p,p) ... for a consumer
// assignment, its size in bytes otherwise, "-" when empty.
func (m memberDesc) assignmentText() string {
	if m.Assignment == nil && m.AssignmentBytes > 0 {
		return fmt.Sprintf("%d bytes", m.AssignmentBytes)
	}
	return partitionsText(m.Assignment)
}

// partitionsText shows topics and partitions as topic(p,p) ..., "-" when
// there are none.
func partitionsText(tps []topicPartitions) string {
	var parts []string
	for _, t := range tps {
		ps := make([]string, len(t.Partitions))
		for i, p := range t.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, cell(t.Topic)+"("+strings.Join(ps, ",")+")")
	}
	return strOrDash(strings.Join(parts, " "))
}

// offsetRow is one partition of a group's offsets: committed and/or assigned
// to a member.
type offsetRow struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	CurrentOffset  *int64  `json:"current_offset"` // null: nothing committed
	LeaderEpoch    *int32  `json:"leader_epoch"`   // of the commit; null if none or unknown
	Metadata       string  `json:"metadata"`
	LogStartOffset *int64  `json:"log_start_offset"` // the data cluster's; null without it
	LogEndOffset   *int64  `json:"log_end_offset"`
	Lag            *int64  `json:"lag"`       // log end - current offset
	MemberID       *string `json:"member_id"` // the member assigned the partition, if any
	ClientID       string  `json:"client_id"`
	Host           string  `json:"host"`
}

// errNoGroup is the error of a group that does not exist, when the server
// says so with state Dead rather than an error code.
var errNoGroup = errors.New("the group does not exist")

// describeGroups describes ids, each at its coordinator, as Kafka's admin
// client does: with ConsumerGroupDescribe first (when the server has it),
// then with DescribeGroups for the groups that are not consumer groups
// (GROUP_ID_NOT_FOUND or UNSUPPORTED_VERSION). It returns the groups that
// exist, in the order of ids, and an error for each that could not be
// described.
func describeGroups(ctx context.Context, cl *kgo.Client, ids []string) ([]*groupDesc, error) {
	descs, _, err := describeGroupsEach(ctx, cl, ids)
	return descs, err
}

// describeGroupsEach is describeGroups that also returns the error of each
// group that could not be described.
func describeGroupsEach(ctx context.Context, cl *kgo.Client, ids []string) ([]*groupDesc, map[string]error, error) {
	if len(ids) == 0 {
		return []*groupDesc{}, nil, nil
	}
	byID, errs := describeEach(ctx, cl, ids)
	out := []*groupDesc{}
	var failed error
	for _, id := range ids {
		if g, ok := byID[id]; ok {
			out = append(out, g)
			continue
		}
		failed = errors.Join(failed, fmt.Errorf("describe %s: %w", id, describeErr(errs, id)))
	}
	return out, errs, failed
}

// describeEach describes the groups ids: the description of each one
// described, the error of each other one.
func describeEach(ctx context.Context, cl *kgo.Client, ids []string) (map[string]*groupDesc, map[string]error) {
	byID := map[string]*groupDesc{}
	errs := map[string]error{}
	consumer := hasConsumerDescribe(ctx, cl)
	// The groups whose coordinator could not be reached are asked again
	// until --timeout (untilReachable): a failover moves them.
	_, _ = untilReachable(ctx, cl, func() (struct{}, error) {
		pending := ids
		if len(errs) > 0 {
			pending = nil
			for _, id := range ids {
				if err, ok := errs[id]; ok && unreachable(err) {
					pending = append(pending, id)
					delete(errs, id)
				}
			}
		}
		classic := pending
		if consumer {
			classic = describeConsumerGroups(ctx, cl, pending, byID, errs)
		}
		describeClassicGroups(ctx, cl, classic, byID, errs)
		for _, id := range pending {
			if err, ok := errs[id]; ok && unreachable(err) {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	return byID, errs
}

// describeErr is the error of group id, which has no description.
func describeErr(errs map[string]error, id string) error {
	if err, ok := errs[id]; ok {
		return err
	}
	return errors.New("no answer for the group")
}

// describeClassicGroups describes ids with DescribeGroups into byID, or
// their errors into errs.
func describeClassicGroups(ctx context.Context, cl *kgo.Client, ids []string, byID map[string]*groupDesc, errs map[string]error) {
	if len(ids) == 0 {
		return
	}
	var shards []kgo.ResponseShard
	inBatches(ids, func(batch []string) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = batch
		shards = append(shards, cl.RequestSharded(ctx, req)...)
	})
	for _, sh := range shards {
		if sh.Err != nil {
			for _, id := range sh.Req.(*kmsg.DescribeGroupsRequest).Groups {
				errs[id] = sh.Err
			}
			continue
		}
		coord := &nodeJSON{NodeID: sh.Meta.NodeID, Host: sh.Meta.Host, Port: sh.Meta.Port}
		for i := range sh.Resp.(*kmsg.DescribeGroupsResponse).Groups {
			rg := &sh.Resp.(*kmsg.DescribeGroupsResponse).Groups[i]
			if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
				if rg.ErrorMessage != nil {
					err = withMessage(err, *rg.ErrorMessage)
				}
				errs[rg.Group] = err
				continue
			}
			if rg.State == "Dead" {
				errs[rg.Group] = errNoGroup
				continue
			}
			byID[rg.Group] = newGroupDesc(rg, coord)
		}
	}
}

// newGroupDesc converts one group of a DescribeGroups answer. Generation
// and leader come from cohort's tagged field (package group); other peers
// do not send it and they stay null.
func newGroupDesc(rg *kmsg.DescribeGroupsResponseGroup, coord *nodeJSON) *groupDesc {
	g := &groupDesc{Group: rg.Group, Coordinator: coord, State: rg.State, Type: "classic", ProtocolType: rg.ProtocolType,
		Protocol: rg.Protocol, MemberCount: len(rg.Members), Members: []memberDesc{}, Offsets: []offsetRow{}}
	if gen, leader, ok := group.DescribeTagOf(rg); ok {
		g.Generation, g.Leader = &gen, &leader
	}
	for _, rm := range rg.Members {
		m := memberDesc{MemberID: rm.MemberID, InstanceID: rm.InstanceID, ClientID: rm.ClientID,
			Host: strings.TrimPrefix(rm.ClientHost, "/"), AssignmentBytes: len(rm.MemberAssignment), MemberType: "classic"}
		if rg.ProtocolType == "consumer" && len(rm.MemberAssignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if a.ReadFrom(rm.MemberAssignment) == nil {
				m.Assignment = []topicPartitions{}
				for _, t := range a.Topics {
					m.Assignment = append(m.Assignment, topicPartitions{Topic: t.Topic, Partitions: slices.Clone(t.Partitions)})
				}
				sortTopicPartitions(m.Assignment)
			}
		}
		m.setLastHeard(group.LastHeardOf(&rm))
		g.Members = append(g.Members, m)
	}
	slices.SortFunc(g.Members, func(a, b memberDesc) int { return strings.Compare(a.MemberID, b.MemberID) })
	return g
}

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// logRange is a partition's log-start and log-end offsets on the data cluster.
type logRange struct{ start, end int64 }

// addOffsets fills the offsets of descs: the committed offsets (from cohort)
// and the partitions assigned to members, with log offsets and lag when
// data is not nil. Problems with single partitions of the data cluster are
// warnings on warn (their figures stay null).
func addOffsets(ctx context.Context, cl *kgo.Client, adm, data *kadm.Client, descs []*groupDesc, warn io.Writer) error {
	rows := map[*groupDesc]map[tp]*offsetRow{}
	topics := map[string]bool{}
	add := func(g *groupDesc, committed kadm.OffsetResponses) {
		m := map[tp]*offsetRow{}
		row := func(t string, p int32) *offsetRow {
			k := tp{t, p}
			if m[k] == nil {
				m[k] = &offsetRow{Topic: t, Partition: p}
				topics[t] = true
			}
			return m[k]
		}
		for _, o := range committed.Sorted() {
			r := row(o.Topic, o.Partition)
			r.CurrentOffset, r.Metadata = ptr(o.At), o.Metadata
			if o.LeaderEpoch >= 0 {
				r.LeaderEpoch = ptr(o.LeaderEpoch)
			}
		}
		for _, mem := range g.Members {
			for _, t := range mem.Assignment {
				for _, p := range t.Partitions {
					r := row(t.Topic, p)
					r.MemberID, r.ClientID, r.Host = ptr(mem.MemberID), mem.ClientID, mem.Host
				}
			}
		}
		rows[g] = m
	}
	// The committed offsets, groupBatch groups per request: one request
	// per group, one after the other, took minutes over a node's 100,000
	// groups.
	ids := make([]string, len(descs))
	for i, g := range descs {
		ids[i] = g.Group
	}
	var err error
	done := 0
	inBatches(ids, func(batch []string) {
		if err != nil {
			return
		}
		var got kadm.FetchOffsetsResponses
		got, err = untilReachable(ctx, cl, func() (kadm.FetchOffsetsResponses, error) {
			got := adm.FetchManyOffsets(ctx, batch...)
			for _, id := range batch {
				g, ok := got[id]
				switch {
				case !ok:
					return got, fmt.Errorf("offsets of %s: no answer for the group", id)
				case g.Err != nil:
					return got, fmt.Errorf("offsets of %s: %w", id, g.Err)
				}
				if err := g.Fetched.Error(); err != nil {
					return got, fmt.Errorf("offsets of %s: %w", id, err)
				}
			}
			return got, nil
		})
		if err != nil {
			return
		}
		for _, g := range descs[done : done+len(batch)] {
			add(g, got[g.Group].Fetched)
		}
		done += len(batch)
	})
	if err != nil {
		return err
	}
	var logs map[tp]logRange
	if data != nil && len(topics) > 0 {
		var err error
		if logs, err = logOffsets(ctx, data, slices.Sorted(maps.Keys(topics)), warn); err != nil {
			return err
		}
	}
	for _, g := range descs {
		if data != nil {
			g.TotalLag = ptr(int64(0))
		}
		for _, r := range rows[g] {
			if lr, ok := logs[tp{r.Topic, r.Partition}]; ok {
				r.LogStartOffset, r.LogEndOffset = ptr(lr.start), ptr(lr.end)
				if r.CurrentOffset != nil {
					r.Lag = ptr(lr.end - *r.CurrentOffset)
					*g.TotalLag += *r.Lag
				}
			}
			g.Offsets = append(g.Offsets, *r)
		}
		slices.SortFunc(g.Offsets, func(a, b offsetRow) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	return nil
}

// logOffsets asks the data cluster for the log-start and log-end offsets of
// every partition of topics. A topic or partition it cannot answer for is a
// warning, and has no entry.
func logOffsets(ctx context.Context, data *kadm.Client, topics []string, warn io.Writer) (map[tp]logRange, error) {
	starts, err := data.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("data cluster: log-start offsets: %w", err)
	}
	ends, err := data.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("data cluster: log-end offsets: %w", err)
	}
	out := map[tp]logRange{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if o.Partition < 0 {
				fmt.Fprintf(warn, "cohort: warning: data cluster: topic %s: %v\n", cell(o.Topic), oneLine(fmt.Sprint(o.Err)))
			} else {
				fmt.Fprintf(warn, "cohort: warning: data cluster: %s partition %d: %v\n", cell(o.Topic), o.Partition, oneLine(fmt.Sprint(o.Err)))
			}
			return
		}
		s, ok := starts.Lookup(o.Topic, o.Partition)
		if !ok || s.Err != nil {
			fmt.Fprintf(warn, "cohort: warning: data cluster: %s partition %d: no log-start offset\n", cell(o.Topic), o.Partition)
			return
		}
		out[tp{o.Topic, o.Partition}] = logRange{start: s.Offset, end: o.Offset}
	})
	return out, nil
}

// failedGroupEntry is the JSON entry of group id, which could not be
// described: the fields of groupDesc, each null but the group and its
// error.
func failedGroupEntry(id string, err error) map[string]any {
	b, _ := json.Marshal(groupDesc{})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k := range m {
		m[k] = nil
	}
	m["group"], m["error"] = id, err.Error()
	return m
}
