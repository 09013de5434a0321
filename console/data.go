package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/grouphistory"
)

// GroupRow is one line of the groups page.
type GroupRow struct {
	ID, State, Type, ProtocolType, Protocol string
	Members                                 int
	Generation                              int32 // -1: unknown
	LastRebalance                           time.Time
	RebalancesPerHour                       float64
	HasHistory                              bool
	Storm                                   bool
	Err                                     string
}

// Member is one member on the group page.
type Member struct {
	ID, InstanceID, ClientID, Host string
	Leader                         bool
	Subscribed                     []string
	Assigned                       []TopicParts
	Revoking                       []TopicParts // KIP-848: held, to give up (group.RevokingTag)
	AssignmentBytes                int          // other protocol types: the raw size
	Decoded                        bool
	Epoch                          int32 // KIP-848 member epoch
	// Heard is how long ago the coordinator last heard from the member,
	// of its session timeout (group.LastHeardTag); nil from a node
	// without the tag.
	Heard *group.LastHeard
}

// HeardText is the member's "Last heard" cell: "32s ago of 45s", "parked of
// 45s" while a JoinGroup or SyncGroup of it waits at the coordinator, "—"
// when the node does not say.
func (m Member) HeardText() string {
	switch {
	case m.Heard == nil:
		return "—"
	case m.Heard.Parked:
		return "parked of " + roundDur(m.Heard.Session)
	}
	return roundDur(m.Heard.Silent) + " ago of " + roundDur(m.Heard.Session)
}

// Quiet reports whether the member has been silent for more than
// group.QuietShare of its session: the page marks it.
func (m Member) Quiet() bool { return m.Heard != nil && m.Heard.Quiet() }

// EvictIn is how long until the member's session timeout evicts it.
func (m Member) EvictIn() string {
	if m.Heard == nil {
		return "—"
	}
	return roundDur(m.Heard.EvictIn())
}

// roundDur is d to a tenth of a second (milliseconds below one second).
func roundDur(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// heardOf is l as Member.Heard: nil unless ok.
func heardOf(l group.LastHeard, ok bool) *group.LastHeard {
	if !ok {
		return nil
	}
	return &l
}

// TopicParts is a topic and partitions.
type TopicParts struct {
	Topic      string
	Partitions []int32
	id         [16]byte
}

// Offset is one committed offset.
type Offset struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
	Err       string
}

// GroupDetail is the group page.
type GroupDetail struct {
	GroupRow
	Leader   string
	Epoch    int32 // KIP-848 group epoch
	Assignor string
	Members  []Member // the first maxMemberRows
	// MembersOmitted counts the members beyond maxMemberRows.
	MembersOmitted int
	Offsets        []Offset
	History        History
	// Settings are the group's consumer-protocol settings (group configs):
	// all of them for a consumer group, the ones set for it otherwise.
	Settings []Setting
}

// Setting is one group config on the group page.
type Setting struct {
	Name, Value string
	Own         bool // set for this group, not the node's
}

// groupSettings reads id's group configs (DescribeConfigs of the GROUP
// resource) from at: all of them if all, else only those set for the group.
// A principal that may not describe them, or a server that keeps none, gets
// none: the page shows the group without them.
func groupSettings(ctx context.Context, at kmsg.Requestor, id string, all bool) []Setting {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, id
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, at)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		return nil
	}
	var out []Setting
	for _, c := range resp.Resources[0].Configs {
		own := c.Source == kmsg.ConfigSourceGroupConfig
		if c.Value == nil || !all && !own {
			continue
		}
		out = append(out, Setting{Name: c.Name, Value: *c.Value, Own: own})
	}
	return out
}

// Topic is one line of the topics page.
type Topic struct {
	Name       string
	ID         string
	Partitions int
	Internal   bool
}

// kafkaErr turns a Kafka error code into an error (nil for 0).
func kafkaErr(code int16) error { return kerr.ErrorForCode(code) }

// groupList is what the groups page lists: the groups that pass its filter,
// how many groups the viewer may describe in all, and how many of them
// pass.
type groupList struct {
	// Rows pass the filter: every one, or the first maxGroupRows by id of
	// a node that applied the limit (each node's first are enough for
	// the first of all).
	Rows []GroupRow
	// Listed counts the groups the viewer may describe, Matching those
	// that pass the filter (beyond a node's limit too).
	Listed, Matching int
	// ProtocolTypes of the listed groups, sorted: the first
	// maxProtocolTypes of them. They do not depend on the order in which
	// the nodes answer: the first of a union are the first of each node's
	// first (each node sends its first, sorted).
	ProtocolTypes []string
	// Unreachable names the nodes that could not be reached, whose groups
	// are missing.
	Unreachable []string
	// NotAsked names the nodes that the console's own node names but the
	// page's client does not know (they joined as the page loaded), whose
	// groups are missing too.
	NotAsked []string
	// Uncounted are the coordinator partitions (of Partitions) that no
	// node counted when it answered: moving between nodes, served by a
	// node that could not be reached, or owned by none. Their groups are neither counted
	// nor listed. Known only when every node counted by partition.
	Uncounted  []int32
	Partitions int32
	// seen holds the ids of the rows taken so far, each with the answer
	// it came in and whether it was counted as matching (see add).
	seen    map[string]seenRow
	answers int // the answers added so far
	filter  group.ListFilter
	// byPartition holds the counts of each coordinator partition a node
	// counted (group.ListSummary.ByPartition), one per partition however
	// many nodes counted it, with the node that counted it; totalsOnly is
	// set by an answer without them, whose totals are then used (see
	// done).
	byPartition map[int32]partitionCount
	totalsOnly  bool
	// owners names the node that owns each coordinator partition now, as
	// the console's node sees the cluster (nil: not known; outside
	// cluster mode, or the node has no lease and its view is stale).
	owners map[int32]int32
}

// partitionCount is one node's count of a coordinator partition.
type partitionCount struct {
	group.PartitionCount
	node int32
}

// better reports whether c, counted by node, replaces was as the count of
// its partition: the count of the partition's current owner (owners) wins;
// between two counts of which neither or both are the owner's, the larger,
// whichever node answered first.
func (l *groupList) better(c group.PartitionCount, node int32, was partitionCount) bool {
	if o, ok := l.owners[c.Partition]; ok && (node == o) != (was.node == o) {
		return node == o
	}
	return c.Listed > was.Listed || c.Listed == was.Listed && c.Matching > was.Matching
}

// seenRow is where a row of the list was taken from: the answer's number
// (groupList.answers), whether it was counted as matching, and the nodes
// that sent it; row is its index in Rows (-1: it did not pass the
// filter), from the node whose row it is, and dropped is set when the row
// at row no longer passes (a later node's row replaced it; done removes
// it).
type seenRow struct {
	answer  int
	matched bool
	nodes   []int32
	row     int
	from    int32
	dropped bool
}

// add takes one node's ListGroups answer. A node that applied the filter
// (group.ListFilterTag) sent the matching groups and the counts; one that
// did not (Kafka, an older cohort) sent every group, which are counted and
// filtered here. The rows of both are filtered again: what a node sent
// is never trusted to match.
func (l *groupList) add(node int32, resp *kmsg.ListGroupsResponse) {
	sum, summed := group.ListSummaryOf(resp)
	l.addAnswer(node, resp.Groups, sum, summed)
}

// addAnswer is add with the answer read: its groups and its summary
// (summed: it has one).
func (l *groupList) addAnswer(node int32, groups []kmsg.ListGroupsResponseGroup, sum group.ListSummary, summed bool) {
	l.answers++
	if summed && sum.ByPartition != nil && (l.Partitions == 0 || l.Partitions == sum.Partitions) {
		l.Partitions = sum.Partitions
		for _, c := range sum.ByPartition {
			// Counted by two nodes while it moves: each count was
			// exact when its node answered; the current owner's is
			// kept, else the larger (better).
			was, dup := l.byPartition[c.Partition]
			if !dup || l.better(c, node, was) {
				l.byPartition[c.Partition] = partitionCount{c, node}
			}
		}
	} else {
		l.totalsOnly = true
	}
	if summed {
		l.Listed += int(sum.Listed)
		l.Matching += int(sum.Matching)
		for _, p := range sum.ProtocolTypes {
			l.addProtocolType(p)
		}
	}
	for _, g := range groups {
		if was, dup := l.seen[g.Group]; dup {
			if !slices.Contains(was.nodes, node) {
				was.nodes = append(was.nodes, node)
				l.seen[g.Group] = was
			}
			if l.ownsRow(g.Group, node) && was.from != node {
				// Its partition's owner's row, not the one of a
				// node that let it go (or took it later).
				l.takeRow(g, node)
				was = l.seen[g.Group]
			}
			// Listed by two nodes while its partition moves: one row.
			// A node that sums up counted each group it sent in its
			// Listed and Matching, so a group another node sent
			// already is taken off both, where that node counted it
			// (a node that did not sum up was counted here, by keep).
			// A group that both count but neither sends (beyond a
			// limit, or not matching) cannot be seen, and stays
			// counted twice. (A node that sends one group twice
			// counted it once: nothing to take off.)
			if summed && was.answer != l.answers {
				was.answer = l.answers
				l.seen[g.Group] = was
				l.Listed--
				if was.matched {
					l.Matching--
				}
			}
			continue
		}
		r, keep := l.rowOf(g)
		seen := seenRow{answer: l.answers, matched: summed || keep, nodes: []int32{node}, row: -1, from: node} // counted as matching: by the node, or here
		if !summed {
			l.Listed++
			l.addProtocolType(r.ProtocolType)
			if keep {
				l.Matching++
			}
		}
		if keep {
			seen.row = len(l.Rows)
			l.Rows = append(l.Rows, r)
		}
		l.seen[g.Group] = seen
	}
	// Counts no smaller than what was received, whatever a node claimed.
	l.Matching = max(l.Matching, len(l.Rows))
	l.Listed = max(l.Listed, l.Matching)
}

// rowOf is the row of a listed group, and whether it passes the filter.
func (l *groupList) rowOf(g kmsg.ListGroupsResponseGroup) (GroupRow, bool) {
	r := GroupRow{ID: g.Group, State: g.GroupState, Type: g.GroupType, ProtocolType: g.ProtocolType, Generation: -1}
	if r.Type == "" {
		r.Type = "classic"
	}
	return r, l.filter.Keep(r.ID, r.State, r.Type, r.ProtocolType)
}

// ownsRow reports whether node owns the coordinator partition of group id
// now, as the console's node sees the cluster (owners; false when not
// known).
func (l *groupList) ownsRow(id string, node int32) bool {
	if l.owners == nil || l.Partitions <= 0 {
		return false
	}
	o, ok := l.owners[coordinator.PartitionFor(id, int(l.Partitions))]
	return ok && o == node
}

// takeRow makes node's row of g, a group another node sent first, its row
// in the list: while the group's partition moves both nodes send it, and
// the first row received may be the old owner's, stale (another state, or
// another type, which decides how the page describes it). Only the row
// changes: the counts are the partitions' (done).
func (l *groupList) takeRow(g kmsg.ListGroupsResponseGroup, node int32) {
	seen := l.seen[g.Group]
	r, keep := l.rowOf(g)
	switch {
	case keep && seen.row >= 0:
		l.Rows[seen.row] = r
		seen.dropped = false
	case keep:
		seen.row = len(l.Rows)
		l.Rows = append(l.Rows, r)
	case seen.row >= 0:
		seen.dropped = true
	}
	seen.from = node
	l.seen[g.Group] = seen
}

// done ends the list once every node's answer is added. When each node
// counted its groups by coordinator partition, the counts are those of
// the partitions, each counted once: exact, even for a partition that
// moved between two nodes' answers and that both counted, groups they did
// not send included. A partition that no node counted is named in
// Uncounted: its groups are missing, and no answer can tell how many
// there are. Otherwise (a node without counts per partition: Kafka, an
// older cohort, a server that filters its merged list) the counts stay
// the nodes' totals, with the groups two nodes sent counted once (add).
func (l *groupList) done() {
	// A row the owner's replaced and that no longer passes the filter.
	l.Rows = slices.DeleteFunc(l.Rows, func(r GroupRow) bool { return l.seen[r.ID].dropped })
	if l.totalsOnly || l.Partitions == 0 {
		return
	}
	l.Listed, l.Matching = 0, 0
	for _, c := range l.byPartition {
		l.Listed += int(c.Listed)
		l.Matching += int(c.Matching)
	}
	l.Uncounted = l.uncounted()
	// The rows agree with the counts: a row of a partition whose count
	// was taken from another node than the ones that sent it is left out.
	// That node does not have the group (the other's answer was stale: a
	// group deleted since the move), or has it beyond its first rows, and
	// then beyond the page's too (the rows the page shows are every
	// node's first, by id).
	l.Rows = slices.DeleteFunc(l.Rows, func(r GroupRow) bool {
		c, ok := l.byPartition[coordinator.PartitionFor(r.ID, int(l.Partitions))]
		return ok && !slices.Contains(l.seen[r.ID].nodes, c.node)
	})
	l.Matching = max(l.Matching, len(l.Rows))
	l.Listed = max(l.Listed, l.Matching)
}

// newGroupList is an empty list of the groups that pass f.
func newGroupList(f group.ListFilter) *groupList {
	return &groupList{seen: map[string]seenRow{}, filter: f, byPartition: map[int32]partitionCount{}}
}

// addProtocolType adds p to the sorted ProtocolTypes, which keep the first
// maxProtocolTypes: once full, a p after the last is left out at the cost
// of one comparison, and one before it pushes the last out.
func (l *groupList) addProtocolType(p string) {
	n := len(l.ProtocolTypes)
	if p == "" || n >= maxProtocolTypes && p >= l.ProtocolTypes[n-1] {
		return
	}
	i, found := slices.BinarySearch(l.ProtocolTypes, p)
	if found {
		return
	}
	if n >= maxProtocolTypes {
		l.ProtocolTypes = l.ProtocolTypes[:maxProtocolTypes-1]
	}
	l.ProtocolTypes = slices.Insert(l.ProtocolTypes, i, p)
}

// listGroups lists the groups the principal may describe that pass f,
// from every node (askEveryNode): ids, states and types only; describeRows
// fills in the rest of the rows a page shows.
// The filter goes to each node with the request (group.ListFilterTag), and
// is applied here to the answer of a node that ignores it. A node that
// cannot be reached (in cluster mode, one that died and stays in the
// registry until its lease ends) does not fail the list: Unreachable says
// which nodes the groups of are missing. Nor does a node the client does not
// know (NotAsked). Any other failure of a node, or every node unreachable, is
// an error.
func listGroups(ctx context.Context, cl *kgo.Client, f group.ListFilter, owners map[int32]int32) (*groupList, error) {
	lreq := kmsg.NewPtrListGroupsRequest()
	if listFilterPushdown {
		group.RequestListFilter(lreq, f)
	}
	l := newGroupList(f)
	l.owners = owners
	unreachable := map[int32]bool{}
	var firstErr error
	shards, err := askEveryNode(ctx, cl, func() kmsg.Request { dup := *lreq; return &dup })
	if err != nil {
		return nil, err
	}
	for _, sh := range shards {
		addr := net.JoinHostPort(sh.Meta.Host, strconv.Itoa(int(sh.Meta.Port)))
		if sh.Err != nil && isUnknownBroker(ctx, cl, sh.Err) {
			if firstErr == nil {
				firstErr = sh.Err
			}
			unreachable[sh.Meta.NodeID] = true
			l.NotAsked = append(l.NotAsked, fmt.Sprintf("node %d (%s)", sh.Meta.NodeID, addr))
			continue
		}
		if sh.Err != nil {
			var op *net.OpError
			if !errors.As(sh.Err, &op) || op.Op != "dial" {
				return nil, sh.Err
			}
			if firstErr == nil {
				firstErr = sh.Err
			}
			unreachable[sh.Meta.NodeID] = true
			l.Unreachable = append(l.Unreachable, fmt.Sprintf("node %d (%s) could not be reached (%v)",
				sh.Meta.NodeID, addr, op.Err))
			continue
		}
		resp := sh.Resp.(*kmsg.ListGroupsResponse)
		if err := kafkaErr(resp.ErrorCode); err != nil && !countedWhileLoading(resp) {
			return nil, err
		}
		l.add(sh.Meta.NodeID, resp)
	}
	if len(l.Unreachable)+len(l.NotAsked) == len(shards) && firstErr != nil {
		return nil, firstErr
	}
	l.askOwnersAgain(ctx, cl, lreq, unreachable)
	l.done()
	return l, nil
}

// countedWhileLoading reports whether resp, a COORDINATOR_LOAD_IN_PROGRESS
// answer, still counts the node's other partitions one by one: a node
// loading a partition it has just taken over answers so, with the groups
// and counts of every partition it has loaded and none of the loading one,
// which is then named as not counted (and asked again of its owner) rather
// than failing the whole page. A node without counts per partition gives no
// way to tell what is missing: its error stands.
func countedWhileLoading(resp *kmsg.ListGroupsResponse) bool {
	sum, ok := group.ListSummaryOf(resp)
	return resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code && ok && sum.ByPartition != nil
}

// askEveryNode sends a request made by newReq to each node that the
// console's own node names in its Metadata, all at once, and returns their
// answers by node id. The nodes are asked for through the seed, which is
// the console's node: its view of the cluster is the one the owners of the
// partitions come from (partitionOwners), so that every node it sees own a
// partition is asked. kgo's RequestSharded asks a node picked at random for
// the brokers instead, and a node whose view lags (cut off from etcd while
// its lease holds, or not caught up yet) names only the nodes it knew of:
// those that joined since were not asked, their partitions went uncounted
// or counted as the lagging node last served them, and the coordinator of
// a group of theirs was an unknown broker to the client.
func askEveryNode(ctx context.Context, cl *kgo.Client, newReq func() kmsg.Request) ([]kgo.ResponseShard, error) {
	self := selfBroker(cl)
	if self == nil {
		return cl.RequestSharded(ctx, newReq()), nil
	}
	resp, err := self.Request(ctx, &kmsg.MetadataRequest{Topics: []kmsg.MetadataRequestTopic{}})
	if err != nil {
		return nil, err
	}
	brokers := slices.Clone(resp.(*kmsg.MetadataResponse).Brokers)
	slices.SortFunc(brokers, func(a, b kmsg.MetadataResponseBroker) int { return int(a.NodeID) - int(b.NodeID) })
	shards := make([]kgo.ResponseShard, len(brokers))
	done := make(chan struct{})
	for i, b := range brokers {
		go func() {
			defer func() { done <- struct{}{} }()
			req := newReq()
			resp, err := nodeBroker(cl, b.NodeID).Request(ctx, req)
			shards[i] = kgo.ResponseShard{Meta: kgo.BrokerMetadata{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack},
				Req: req, Resp: resp, Err: err}
		}()
	}
	for range brokers {
		<-done
	}
	return shards, nil
}

// nodeBroker is the handle through which the console asks node id: kgo's
// own, which knows the nodes of the last Metadata kgo asked for. A node
// that joined since the page's client asked for one, of a node that does
// not know it yet (its view lags), is unknown to it, even after kgo asks
// again (twice, of any node): the request fails with kgo's "unknown
// broker". A variable for tests, which make a node unknown so.
var nodeBroker = func(cl *kgo.Client, id int32) *kgo.Broker { return cl.Broker(int(id)) }

// isUnknownBroker reports whether err is kgo's error for a request to a
// node it does not know. kgo does not export it; a request to node -1,
// which no node is (kgo does not look it up), fails with it at once.
func isUnknownBroker(ctx context.Context, cl *kgo.Client, err error) bool {
	_, unknown := cl.Broker(-1).Request(ctx, kmsg.NewPtrApiVersionsRequest())
	return unknown != nil && errors.Is(err, unknown)
}

// askOwnersAgain asks the current owner (owners) of each coordinator
// partition that it did not count once more, one request per such node,
// and takes from its answer the counts and groups of those partitions
// only: a move that ended while the nodes answered (the new owner answered
// before it took over) is then counted by its owner, whether no node
// counted the partition (the old owner answered after it let go) or only
// the old owner did, before it let go, a count that may be stale (a group
// created or deleted on the new owner since). A partition its owner still
// does not count, or whose owner is not known, could not be reached or is
// not known to the client (skip: not asked again) or does not answer,
// keeps the count it has, or stays uncounted (done names it).
func (l *groupList) askOwnersAgain(ctx context.Context, cl *kgo.Client, lreq *kmsg.ListGroupsRequest, skip map[int32]bool) {
	if l.totalsOnly || l.Partitions == 0 || l.owners == nil {
		return
	}
	missing := map[int32]map[int32]bool{} // node -> partitions
	for p := range l.Partitions {
		o, ok := l.owners[p]
		if c, counted := l.byPartition[p]; !ok || skip[o] || counted && c.node == o {
			continue
		}
		if missing[o] == nil {
			missing[o] = map[int32]bool{}
		}
		missing[o][p] = true
	}
	for _, node := range slices.Sorted(maps.Keys(missing)) {
		resp, err := nodeBroker(cl, node).Request(ctx, lreq)
		if err != nil {
			continue
		}
		lg := resp.(*kmsg.ListGroupsResponse)
		if lg.ErrorCode != 0 && !countedWhileLoading(lg) {
			continue
		}
		only := missing[node]
		sum, summed := group.ListSummaryOf(lg)
		if !summed || sum.Partitions != l.Partitions {
			continue
		}
		groups := slices.DeleteFunc(lg.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !only[coordinator.PartitionFor(g.Group, int(l.Partitions))]
		})
		sum.ByPartition = slices.DeleteFunc(sum.ByPartition, func(c group.PartitionCount) bool { return !only[c.Partition] })
		l.addAnswer(node, groups, sum, true)
	}
}

// uncounted are the coordinator partitions of which no node's count was
// taken, in order.
func (l *groupList) uncounted() []int32 {
	var ps []int32
	for p := range l.Partitions {
		if _, ok := l.byPartition[p]; !ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// listFilterPushdown: the groups page sends its filter to the nodes. Off
// (tests and benchmarks), it asks for every group and filters them here, as
// before group.ListFilterTag.
var listFilterPushdown = true

// describeBatch is the most groups one DescribeGroups or
// ConsumerGroupDescribe of the console names: a page over many groups asks
// in batches, never in one request a node would refuse (it bounds the
// entries of a request) or answer with one huge response.
var describeBatch = 1000 // a variable for tests

// describeRows fills in rows (in place) with what DescribeGroups says, sent
// to each group's coordinator in batches, and ConsumerGroupDescribe for
// consumer-protocol groups the node does not sum up.
func describeRows(ctx context.Context, cl *kgo.Client, rows []GroupRow, now time.Time) error {
	for len(rows) > 0 {
		n := min(len(rows), describeBatch)
		if err := describeBatchRows(ctx, cl, rows[:n], now); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

func describeBatchRows(ctx context.Context, cl *kgo.Client, rows []GroupRow, now time.Time) error {
	var classic, consumer []string
	idx := make(map[string]int, len(rows))
	for i, r := range rows {
		idx[r.ID] = i
		if r.Type == "consumer" {
			consumer = append(consumer, r.ID)
		} else {
			classic = append(classic, r.ID)
		}
	}
	// row is the line of a described group, nil when the description is
	// an error (noted on the line) or of a group not listed.
	row := func(id string, code int16) *GroupRow {
		j, ok := idx[id]
		if !ok {
			return nil
		}
		if err := kafkaErr(code); err != nil {
			rows[j].Err = err.Error()
			return nil
		}
		return &rows[j]
	}
	// Every group, consumer-protocol groups too. No members: the page
	// shows how many there are, which the node counts (group.MembersTag),
	// and for a consumer-protocol group sums up with the other columns
	// (group.ConsumerSummaryTag).
	described, err := describeGroups(ctx, cl, append(classic, consumer...), 0, 0)
	if err != nil {
		return err
	}
	summed := map[string]bool{}
	for i := range described {
		d := &described[i]
		if j, ok := idx[d.Group]; ok && rows[j].Type == "consumer" {
			// A consumer group's entry answers GROUP_ID_NOT_FOUND (it is
			// not a classic group) and still carries the history, and
			// its summary when the node gives one.
			if d.ErrorCode == 0 || d.ErrorCode == kerr.GroupIDNotFound.Code {
				summarize(&rows[j], historyOf(d), now)
			}
			if cs, ok := group.ConsumerSummaryOf(d); ok {
				r := &rows[j]
				r.State, r.Members, r.Generation, r.Protocol = cs.State, int(cs.Members), cs.Epoch, cs.Assignor
				r.ProtocolType = "consumer"
				summed[d.Group] = true
			}
			continue
		}
		r := row(d.Group, d.ErrorCode)
		if r == nil {
			continue
		}
		r.State, r.ProtocolType, r.Protocol, r.Members = d.State, d.ProtocolType, d.Protocol, memberCount(d)
		if gen, _, ok := group.DescribeTagOf(d); ok {
			r.Generation = gen
		}
		summarize(r, historyOf(d), now)
	}
	// A node that gives no summary (an older cohort) is asked
	// ConsumerGroupDescribe, which sends every member with its assignment,
	// at the coordinator the console's own node names (coordinatorsOf), as
	// DescribeGroups was: kgo's routing asks a node picked at random, whose
	// view may lag.
	consumer = slices.DeleteFunc(consumer, func(id string) bool { return summed[id] })
	if len(consumer) == 0 {
		return nil
	}
	byNode, order, err := coordinatorsOf(ctx, cl, consumer, func(id string, code int16) { row(id, code) })
	if err != nil {
		return err
	}
	for _, node := range order {
		creq := kmsg.NewPtrConsumerGroupDescribeRequest()
		creq.Groups = byNode[node]
		var at kmsg.Requestor = cl
		if node >= 0 {
			at = nodeBroker(cl, node)
		}
		cresp, err := creq.RequestWith(ctx, at)
		if err != nil {
			return err
		}
		for i := range cresp.Groups {
			d := &cresp.Groups[i]
			r := row(d.Group, d.ErrorCode)
			if r == nil {
				continue
			}
			r.State, r.Members, r.Generation, r.Protocol = d.State, len(d.Members), d.Epoch, d.AssignorName
			r.ProtocolType = "consumer"
		}
	}
	return nil
}

// coordinatorsOf groups ids by their coordinator as the console's own node
// names it (one FindCoordinator sent to the seed, as coordinatorOf), in the
// order the coordinators are first named; a group whose coordinator is not
// found is told to failed with FindCoordinator's error code. A client
// without a seed gets every group under node -1: kgo's routing.
func coordinatorsOf(ctx context.Context, cl *kgo.Client, ids []string, failed func(id string, code int16)) (map[int32][]string, []int32, error) {
	self := selfBroker(cl)
	if self == nil {
		return map[int32][]string{-1: ids}, []int32{-1}, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = ids
	r, err := self.Request(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	byNode := map[int32][]string{}
	var order []int32
	for _, c := range r.(*kmsg.FindCoordinatorResponse).Coordinators {
		if c.ErrorCode != 0 {
			failed(c.Key, c.ErrorCode)
			continue
		}
		if _, ok := byNode[c.NodeID]; !ok {
			order = append(order, c.NodeID)
		}
		byNode[c.NodeID] = append(byNode[c.NodeID], c.Key)
	}
	return byNode, order, nil
}

// describeGroup fetches one group's page. A group the principal may not
// describe is errForbidden; a group that does not exist errNotFound.
func describeGroup(ctx context.Context, cl *kgo.Client, id string, now time.Time) (*GroupDetail, error) {
	g := &GroupDetail{GroupRow: GroupRow{ID: id, Generation: -1, Type: "classic"}}
	described, err := describeGroups(ctx, cl, []string{id}, int32(maxListed), int32(maxMemberRows))
	err = asCoordinatorNotKnown(ctx, cl, err)
	if errors.Is(err, kerr.GroupAuthorizationFailed) {
		return nil, errForbidden
	}
	if err != nil {
		return nil, err
	}
	if len(described) != 1 {
		return nil, fmt.Errorf("DescribeGroups answered %d groups", len(described))
	}
	d := &described[0]
	switch code := d.ErrorCode; {
	case code == kerr.GroupAuthorizationFailed.Code:
		return nil, errForbidden
	case code != 0 && code != kerr.GroupIDNotFound.Code:
		return nil, kafkaErr(code)
	}
	g.History = historyOf(d)
	if d.ErrorCode == kerr.GroupIDNotFound.Code || d.State == "Dead" && len(d.Members) == 0 && d.ProtocolType == "" {
		// Kafka's answer for an unknown group, or a consumer-protocol one.
		return describeConsumerGroup(ctx, cl, g, now)
	}
	g.State, g.ProtocolType, g.Protocol = d.State, d.ProtocolType, d.Protocol
	if gen, leader, ok := group.DescribeTagOf(d); ok {
		g.Generation, g.Leader = gen, leader
	}
	for _, m := range d.Members {
		mm := Member{ID: m.MemberID, ClientID: m.ClientID, Host: clientHost(m.ClientHost), Leader: m.MemberID == g.Leader,
			Heard: heardOf(group.LastHeardOf(&m))}
		if m.InstanceID != nil {
			mm.InstanceID = *m.InstanceID
		}
		mm.AssignmentBytes = len(m.MemberAssignment)
		if d.ProtocolType == "consumer" {
			var meta kmsg.ConsumerMemberMetadata
			if meta.ReadFrom(m.ProtocolMetadata) == nil {
				mm.Subscribed = meta.Topics
			}
			// Empty while the group rebalances: "none".
			mm.Decoded = true
			var a kmsg.ConsumerMemberAssignment
			if len(m.MemberAssignment) > 0 && a.ReadFrom(m.MemberAssignment) == nil {
				for _, t := range a.Topics {
					mm.Assigned = append(mm.Assigned, TopicParts{Topic: t.Topic, Partitions: sorted(t.Partitions)})
				}
			}
		}
		g.Members = append(g.Members, mm)
	}
	summarize(&g.GroupRow, g.History, now)
	sortMembers(g.Members)
	g.capMembers(memberCount(d))
	g.Settings = groupSettings(ctx, selfOr(cl), id, false)
	g.Offsets, err = offsetsAtCoordinator(ctx, cl, id)
	return g, err
}

// offsetsAtCoordinator is fetchOffsets at id's coordinator, as the console's
// own node names it (coordinatorOf).
func offsetsAtCoordinator(ctx context.Context, cl *kgo.Client, id string) ([]Offset, error) {
	at, err := coordinatorOf(ctx, cl, id)
	if err != nil {
		return nil, err
	}
	return fetchOffsets(ctx, at, id)
}

// selfBroker is the console's own node, the client's seed (nil: a client
// without one, as in some tests).
func selfBroker(cl *kgo.Client) *kgo.Broker {
	if seeds := cl.SeedBrokers(); len(seeds) > 0 {
		return seeds[0]
	}
	return nil
}

// selfOr is the console's own node (selfBroker), or cl, which asks any
// node, for a client without a seed. A group's configs are asked of it:
// they are the cluster's, and its view is the one the pages follow.
func selfOr(cl *kgo.Client) kmsg.Requestor {
	if self := selfBroker(cl); self != nil {
		return self
	}
	return cl
}

// coordinatorOf is the coordinator of group id as the console's own node
// names it (FindCoordinator sent to the seed), to send the group page's
// requests of the group to: kgo's own lookup asks a node picked at random,
// and a node whose view lags (cut off from etcd while its lease holds)
// names itself for a partition taken from it, and answers with the stale
// offsets and members it last had, or names a node that no longer
// coordinates the group. A client without a seed gets cl, kgo's routing.
func coordinatorOf(ctx context.Context, cl *kgo.Client, id string) (kmsg.Requestor, error) {
	self := selfBroker(cl)
	if self == nil {
		return cl, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = id, []string{id} // one or the other, as the version sent needs
	r, err := self.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.FindCoordinatorResponse)
	code, node := resp.ErrorCode, resp.NodeID
	if len(resp.Coordinators) > 0 {
		code, node = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
	}
	if err := kafkaErr(code); err != nil {
		return nil, fmt.Errorf("finding the coordinator of group %s: %w", id, err)
	}
	return nodeBroker(cl, node), nil
}

// consumerMember is a consumer-protocol member of a ConsumerGroupDescribe
// answer as the group page shows it: what it is assigned and, from cohort's
// tag (group.RevokingTag), what it still holds and must give up, which the
// assignment leaves out as Kafka's does: without it, the member a
// reconciliation waits for read as holding only its share.
func consumerMember(m *kmsg.ConsumerGroupDescribeResponseGroupMember) Member {
	mm := Member{ID: m.MemberID, ClientID: m.ClientID, Host: clientHost(m.ClientHost), Epoch: m.MemberEpoch, Decoded: true,
		Subscribed: m.SubscribedTopics, Heard: heardOf(group.ConsumerLastHeardOf(m))}
	if m.InstanceID != nil {
		mm.InstanceID = *m.InstanceID
	}
	for _, t := range m.Assignment.TopicPartitions {
		mm.Assigned = append(mm.Assigned, TopicParts{Topic: t.Topic, id: t.TopicID, Partitions: sorted(t.Partitions)})
	}
	revoking, _ := group.RevokingOf(m)
	for _, t := range revoking {
		mm.Revoking = append(mm.Revoking, TopicParts{Topic: t.Topic, Partitions: sorted(t.Partitions)})
	}
	return mm
}

func describeConsumerGroup(ctx context.Context, cl *kgo.Client, g *GroupDetail, now time.Time) (*GroupDetail, error) {
	at, err := coordinatorOf(ctx, cl, g.ID)
	if errors.Is(err, kerr.GroupAuthorizationFailed) {
		return nil, errForbidden
	}
	if err != nil {
		return nil, err
	}
	creq := kmsg.NewPtrConsumerGroupDescribeRequest()
	creq.Groups = []string{g.ID}
	cresp, err := creq.RequestWith(ctx, at)
	if errors.Is(err, kerr.GroupAuthorizationFailed) {
		return nil, errForbidden
	}
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		return nil, errTopicsForbidden
	}
	if err != nil {
		return nil, err
	}
	if len(cresp.Groups) != 1 {
		return nil, errNotFound
	}
	d := &cresp.Groups[0]
	switch code := d.ErrorCode; {
	case code == kerr.GroupAuthorizationFailed.Code:
		return nil, errForbidden
	case code == kerr.TopicAuthorizationFailed.Code:
		return nil, errTopicsForbidden
	case code == kerr.GroupIDNotFound.Code, code == kerr.UnsupportedVersion.Code:
		return nil, errNotFound
	case code != 0:
		return nil, kafkaErr(code)
	}
	g.Type, g.ProtocolType, g.State, g.Epoch, g.Assignor = "consumer", "consumer", d.State, d.Epoch, d.AssignorName
	g.Generation, g.Protocol = d.Epoch, d.AssignorName
	byID := false
	for i := range d.Members {
		mm := consumerMember(&d.Members[i])
		for _, t := range mm.Assigned {
			byID = byID || t.Topic == ""
		}
		g.Members = append(g.Members, mm)
	}
	// An assignment may name topics only by id; Metadata names them.
	if byID {
		names, _ := topicNames(ctx, cl)
		for i := range g.Members {
			for j := range g.Members[i].Assigned {
				tp := &g.Members[i].Assigned[j]
				if tp.Topic == "" {
					tp.Topic = names[tp.id]
				}
				if tp.Topic == "" {
					tp.Topic = fmt.Sprintf("topic id %x", tp.id)
				}
			}
		}
	}
	summarize(&g.GroupRow, g.History, now)
	sortMembers(g.Members)
	g.capMembers(len(g.Members))
	g.Settings = groupSettings(ctx, selfOr(cl), g.ID, true)
	var err2 error
	g.Offsets, err2 = fetchOffsets(ctx, at, g.ID)
	return g, err2
}

// maxMemberRows is the most members a group page lists: a group of 2,000
// members made a page of megabytes. The rest are counted; `cohort group
// describe` lists them all. A classic group's page asks the node for no
// more (group.MembersTag), the first it lists (join order); a
// consumer-protocol group's comes whole from ConsumerGroupDescribe, which
// has no such bound, and the page keeps the first by client and member id.
var maxMemberRows = 500 // a variable for tests

// capMembers keeps the first maxMemberRows members (sorted) of the total
// the group has and counts the others, those the node did not send too.
func (g *GroupDetail) capMembers(total int) {
	g.Members = g.Members[:min(len(g.Members), maxMemberRows)]
	g.GroupRow.Members = max(total, len(g.Members))
	g.MembersOmitted = g.GroupRow.Members - len(g.Members)
}

func sorted(ps []int32) []int32 {
	out := slices.Clone(ps)
	slices.Sort(out)
	return out
}

func sortMembers(ms []Member) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].ClientID != ms[j].ClientID {
			return ms[i].ClientID < ms[j].ClientID
		}
		return ms[i].ID < ms[j].ID
	})
}

// fetchOffsets reads the group's committed offsets (all topics) from at,
// the group's coordinator.
func fetchOffsets(ctx context.Context, at kmsg.Requestor, id string) ([]Offset, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = id
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = id
	req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	resp, err := req.RequestWith(ctx, at)
	if err != nil {
		return nil, err
	}
	if err := kafkaErr(resp.ErrorCode); err != nil {
		return nil, err
	}
	var out []Offset
	add := func(topic string, p int32, off int64, meta *string, code int16) {
		o := Offset{Topic: topic, Partition: p, Offset: off}
		if meta != nil {
			o.Metadata = *meta
		}
		if err := kafkaErr(code); err != nil {
			o.Err = err.Error()
		}
		out = append(out, o)
	}
	// franz-go sends the request at the version the node offers and
	// answers it in both shapes: for v8+ it also copies a single group's
	// answer into the top-level fields. Read one shape, never both (reading
	// both listed every offset twice).
	if len(resp.Groups) == 0 {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
			}
		}
	}
	for _, g := range resp.Groups {
		if err := kafkaErr(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// listTopics lists the topics the principal may describe.
func listTopics(ctx context.Context, cl *kgo.Client) ([]Topic, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []Topic
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode == kerr.TopicAuthorizationFailed.Code {
			continue
		}
		tp := Topic{Name: *t.Topic, Partitions: len(t.Partitions), Internal: t.IsInternal}
		if t.TopicID != ([16]byte{}) {
			tp.ID = fmt.Sprintf("%x", t.TopicID)
		}
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func topicNames(ctx context.Context, cl *kgo.Client) (map[[16]byte]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[[16]byte]string{}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out[t.TopicID] = *t.Topic
		}
	}
	return out, nil
}

var (
	errForbidden = errors.New("not authorized")
	errNotFound  = errors.New("no such group")
	// errTopicsForbidden: the principal may describe a consumer-protocol
	// group but not every topic its members hold or are to hold, and the
	// coordinator withholds the whole group (its assignment would reveal
	// the topics).
	errTopicsForbidden = errors.New("not authorized for the group's topics")
)

// coordinatorNotKnown is the failure of a group's page whose coordinator,
// as the console's own node names it, is a node the page's client does not
// know (isUnknownBroker): one that joined the cluster as the page loaded.
// Asking kgo for Metadata again does not help while the node it asks lags
// (nodeBroker); the page says so and asks for a reload.
type coordinatorNotKnown struct{ node int32 }

func (e coordinatorNotKnown) Error() string {
	return fmt.Sprintf("the coordinator of the group, node %d, joined the cluster as the page loaded", e.node)
}

// asCoordinatorNotKnown is err as coordinatorNotKnown when it is a failure
// to ask a coordinator the client does not know, else err.
func asCoordinatorNotKnown(ctx context.Context, cl *kgo.Client, err error) error {
	var ce *grouphistory.CoordinatorError
	if errors.As(err, &ce) && isUnknownBroker(ctx, cl, ce.Err) {
		return coordinatorNotKnown{ce.Node}
	}
	return err
}

// sortKeys are the groups page's orders besides the default, by name.
var sortKeys = []string{"state", "type", "members", "generation", "rebalance", "rate"}

// sortNeedsDescription reports whether sorting by key needs what only
// DescribeGroups tells (members, generation, rebalances); by name, state or
// type the list alone sorts. (An unknown key is refused before.)
func sortNeedsDescription(key string) bool {
	switch key {
	case "members", "generation", "rebalance", "rate":
		return true
	}
	return false
}

// sortRows sorts rows by key (then by id), descending with desc.
func sortRows(rows []GroupRow, key string, desc bool) {
	less := func(a, b GroupRow) int {
		switch key {
		case "state":
			return strings.Compare(a.State, b.State)
		case "type":
			return strings.Compare(a.Type, b.Type)
		case "members":
			return a.Members - b.Members
		case "generation":
			return int(a.Generation) - int(b.Generation)
		case "rebalance":
			return a.LastRebalance.Compare(b.LastRebalance)
		case "rate":
			switch {
			case a.RebalancesPerHour < b.RebalancesPerHour:
				return -1
			case a.RebalancesPerHour > b.RebalancesPerHour:
				return 1
			}
		}
		return 0
	}
	slices.SortStableFunc(rows, func(a, b GroupRow) int {
		c := less(a, b)
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if desc {
			c = -c
		}
		return c
	})
}
