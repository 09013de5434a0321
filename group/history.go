package group

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The rebalance history: the shard records every rebalance of a group as one
// RebalanceEvent (what started it, how it went, what it did), stores it as a
// record of its own kind (keyHistory, records-then-replay like every other
// record, so it survives a restart and a failover), keeps the last
// Config.HistorySize per group, and flags groups that rebalance too often
// (StormStatus). docs/history.md describes the schema, the causes, the storm
// rule and the wire tag; the JSON below is a stable interface (the CLI and
// the console read it): fields are only ever added.

// HistoryTag is the tagged field number, in flexible versions (v5+) of
// DescribeGroups, of cohort's rebalance history. In a request its value is an
// int32: how many of the latest events to return (0 = none, but still the
// storm and waiting views; negative = all kept). In the answer, each group
// that exists carries it with a JSON HistoryDoc. Clients that do not send it
// get no extra bytes.
const HistoryTag = 10001

// HistoryListsTag is a second tagged field of a DescribeGroups request
// (v5+), read only beside HistoryTag: an int32 m >= 0 that bounds each list
// of the events returned (more_causes, waited_for, evicted, members) and the
// waiting view's members to m entries; the event or view then says in
// "omitted" how many were left out. Members whose assignment did not change
// (and that are not new) are left out first, without being counted. An
// event of a big group still lists up to storedListMax entries per list (the
// stored bound); a page that needs only when they started asks for m = 0. A server without it ignores the
// tag and returns every entry.
const HistoryListsTag = 10002

// HistoryDocVersion is HistoryDoc.Version.
const HistoryDocVersion = 1

// CauseKind names what started (or joined) a rebalance.
type CauseKind string

// The causes. Classic groups: MemberJoined .. LeaderNotSynced, Admin,
// Loaded; consumer-protocol groups: MemberJoined, SubscriptionChanged,
// MemberLeft, SessionTimeout, RebalanceTimeout, StaticReplaced, Admin,
// TopicsChanged, Loaded.
const (
	CauseMemberJoined        CauseKind = "member_joined"        // a new member joined (its KIP-800 reason)
	CauseMetadataChanged     CauseKind = "metadata_changed"     // a known member rejoined with other metadata (classic)
	CauseSubscriptionChanged CauseKind = "subscription_changed" // a member's subscription or assignor changed (consumer)
	CauseMemberLeft          CauseKind = "member_left"          // LeaveGroup (its reason)
	CauseSessionTimeout      CauseKind = "session_timeout"      // no heartbeat within the session timeout
	CauseRebalanceTimeout    CauseKind = "rebalance_timeout"    // did not rejoin (classic) or revoke (consumer) in time
	CauseSyncTimeout         CauseKind = "sync_timeout"         // followers did not SyncGroup in time
	CauseLeaderNotSynced     CauseKind = "leader_not_synced"    // the leader never sent SyncGroup with the assignment
	CauseStaticReplaced      CauseKind = "static_replaced"      // a new process took a static member's instance id
	CauseAdmin               CauseKind = "admin"                // an operator (Detail: remove_members, delete, ...)
	CauseLoaded              CauseKind = "loaded"               // the group was loaded (restart or failover)
	CauseTopicsChanged       CauseKind = "topics_changed"       // subscribed topics' partitions changed (consumer)
	CauseOther               CauseKind = "other"                // anything else (Detail says what)
)

// Cause is one trigger of a rebalance.
type Cause struct {
	Kind CauseKind `json:"kind"`
	At   time.Time `json:"at"`
	// The member concerned, when there is one.
	MemberID   string `json:"member_id,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	// Reason is the client's reason (KIP-800 JoinGroup/LeaveGroup reason).
	Reason string `json:"reason,omitempty"`
	// LastHeartbeat is the member's last heartbeat (session timeouts).
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	// Topics are the topics whose metadata changed (TopicsChanged).
	Topics []string `json:"topics,omitempty"`
	// Detail is free text: the admin action, the previous instance's
	// member id of a static replacement, ...
	Detail string `json:"detail,omitempty"`
	// Rejoin (member_joined only; left out otherwise): the joining member
	// likely replaces a member a timeout evicted from the group within
	// RejoinWindow, with the same instance id, or the same client id and
	// client host (rejoin.go).
	Rejoin *Rejoin `json:"rejoin,omitempty"`
}

// Wait is one member the rebalance waited for, and how long.
type Wait struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	// Phase: "join", "sync" (classic), "revoke", "assign" (consumer).
	Phase    string `json:"phase"`
	WaitedMs int64  `json:"waited_ms"`
	// Evicted: the member never came and was removed.
	Evicted bool `json:"evicted,omitempty"`
}

// TopicPartitions is a set of partitions of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// MemberChange is what the rebalance did to one member's assignment.
type MemberChange struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	// Decoded: the assignment was understood (consumer-protocol groups and
	// classic groups of protocol type "consumer"), so Added, Removed and
	// Partitions are meaningful; otherwise only the sizes are.
	Decoded    bool              `json:"decoded"`
	Partitions int               `json:"partitions,omitempty"` // partitions owned after
	Added      []TopicPartitions `json:"added,omitempty"`
	Removed    []TopicPartitions `json:"removed,omitempty"`
	// AssignmentBytes is the size of the assignment (classic groups);
	// Changed says whether its bytes differ from before.
	AssignmentBytes int  `json:"assignment_bytes"`
	Changed         bool `json:"changed"`
	// New: the member was not in the group before this rebalance.
	New bool `json:"new,omitempty"`
}

// RebalanceEvent is one rebalance of one group, from the first trigger to
// the group being Stable (or Empty) again.
type RebalanceEvent struct {
	// Seq numbers a group's events (1, 2, ...); it survives reloads. It
	// is 0 in an event told to OnRebalance by a node that keeps no history
	// (HistorySize < 0): nothing stores the number there, so it could not
	// survive a reload.
	Seq   uint64 `json:"seq"`
	Group string `json:"group"`
	// Type is "classic" or "consumer".
	Type         string `json:"type"`
	ProtocolType string `json:"protocol_type,omitempty"`
	// Generation is the generation (classic) or group epoch (consumer)
	// the rebalance produced; FromGeneration the one before.
	FromGeneration int32     `json:"from_generation"`
	Generation     int32     `json:"generation"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	// Outcome: "stable" (a new assignment is in force), "empty" (every
	// member left), "superseded" (another rebalance started before this one
	// completed; consumer groups); "failed" is reserved and never written
	// (a failed assignment write does not end the event).
	Outcome string `json:"outcome"`
	// Cause is what started the rebalance; MoreCauses what happened while
	// it was in progress (they did not start another one), in order.
	Cause      Cause   `json:"cause"`
	MoreCauses []Cause `json:"more_causes,omitempty"`
	// CutCauses counts by kind the causes the rebalance took in past the
	// 64 MoreCauses keeps (a rebalance in which hundreds of members timed
	// out). Memory only, never stored: it is for OnRebalance, whose
	// observer counts every member removed for a timeout
	// (cohort_group_member_timeouts_total), not only the first 65.
	CutCauses map[CauseKind]int `json:"-"`
	// JoinMs and SyncMs are the phases (classic: join barrier, then until
	// the assignment is stored; consumer: JoinMs is until the target
	// assignment was computed (0), SyncMs until every member converged).
	DurationMs int64 `json:"duration_ms"`
	JoinMs     int64 `json:"join_ms"`
	SyncMs     int64 `json:"sync_ms"`
	// EarlierTargetMs (consumer, left out when 0) is the part of JoinMs
	// during which an earlier target of the event was in force, the members
	// reconciling to it, until a bump the event took in replaced it (a join
	// burst, or a member fenced for not revoking: its wait is in WaitedFor,
	// evicted). The rest of JoinMs the group had no target: it was waiting
	// for a heartbeat to compute one (after a timer fenced a member).
	EarlierTargetMs int64 `json:"earlier_target_ms,omitempty"`
	// InitialDelay: the join phase began with the initial rebalance delay
	// of a group that was Empty (KIP-134), which waits for more members
	// and is most of JoinMs (classic).
	InitialDelay bool   `json:"initial_delay,omitempty"`
	Leader       string `json:"leader,omitempty"`
	Protocol     string `json:"protocol,omitempty"`
	// WaitedFor lists the members the rebalance waited for, slowest first.
	WaitedFor []Wait `json:"waited_for,omitempty"`
	// Evicted are the members removed during the rebalance.
	Evicted []string `json:"evicted,omitempty"`
	// Members is the assignment change per member (sorted by member id).
	Members []MemberChange `json:"members,omitempty"`
	// Omitted counts the entries HistoryListsTag left out (nil when none).
	Omitted *Omitted `json:"omitted,omitempty"`
}

// inUTC puts every time of ev in UTC and an empty MoreCauses as nil, as a
// stored event decodes: the history is served in one zone whatever the zone
// of the node that recorded an event (docs/history.md), and a live event is
// the same value as itself reloaded from the store. The causes are copied:
// the rebalance's tracker may still hold them.
func (ev *RebalanceEvent) inUTC() {
	ev.Start, ev.End = ev.Start.UTC(), ev.End.UTC()
	ev.Cause.inUTC()
	if len(ev.MoreCauses) == 0 {
		ev.MoreCauses = nil
		return
	}
	ev.MoreCauses = slices.Clone(ev.MoreCauses)
	for i := range ev.MoreCauses {
		ev.MoreCauses[i].inUTC()
	}
}

// inUTC puts c's times in UTC, copying what it points to.
func (c *Cause) inUTC() {
	c.At = c.At.UTC()
	if c.LastHeartbeat != nil {
		t := c.LastHeartbeat.UTC()
		c.LastHeartbeat = &t
	}
	if c.Rejoin != nil {
		r := *c.Rejoin
		r.At = r.At.UTC()
		c.Rejoin = &r
	}
}

// inUTC puts w's times in UTC (nil: nothing), as the events' (inUTC).
func (w *Waiting) inUTC() {
	if w == nil {
		return
	}
	w.Since = w.Since.UTC()
	if w.Cause != nil {
		c := *w.Cause
		c.inUTC()
		w.Cause = &c
	}
	for i := range w.Members {
		m := &w.Members[i]
		m.Since = m.Since.UTC()
		if m.Deadline != nil {
			d := m.Deadline.UTC()
			m.Deadline = &d
		}
	}
}

// Omitted counts the entries of an event's lists that a bound on them left
// out: the stored bound (storedListMax, historybound.go), which every event
// of a big group has, and HistoryListsTag, which adds to it.
type Omitted struct {
	MoreCauses int `json:"more_causes,omitempty"`
	WaitedFor  int `json:"waited_for,omitempty"`
	Evicted    int `json:"evicted,omitempty"`
	// Members counts the members left out whose assignment changed (or
	// that were new); those without a change are not counted.
	Members int `json:"members,omitempty"`
	// CauseDetails: the event was too large to store even with its lists
	// emptied, so its causes keep only their kind and time, and its
	// leader and protocol are left out (the stored bound).
	CauseDetails bool `json:"cause_details,omitempty"`
}

// StormStatus is the storm detector's view of a group: flagged when it
// rebalanced more than Threshold times within Window.
type StormStatus struct {
	Group     string `json:"group"`
	Flagged   bool   `json:"flagged"`
	Count     int    `json:"count"` // rebalances that started within the window
	Threshold int    `json:"threshold"`
	WindowMs  int64  `json:"window_ms"`
	// Since is when the group was flagged (nil when not flagged).
	Since *time.Time `json:"since,omitempty"`
	// Causes counts the causes of the rebalances in the window (each
	// event's Cause and MoreCauses).
	Causes map[CauseKind]int `json:"causes,omitempty"`
	// StartedBy counts what started them (each event's Cause only): the
	// members that rejoin during a rebalance add MoreCauses, and in a
	// storm of joins they would otherwise look like its cause.
	StartedBy map[CauseKind]int `json:"started_by,omitempty"`
	// Loaded, told to OnStorm only: the group was found flagged when its
	// partition loaded (a restart, or in cluster mode a partition that moved
	// here), so the storm is, as a rule, one flagged before, by this node or
	// the one that served the partition: not a new storm.
	Loaded bool `json:"-"`
	// Late, told to OnStorm only: the group was flagged by a rebalance
	// whose write became durable after its partition's shard was unloaded
	// (the partition moved away, or the node is stopping). Its flag was
	// counted by nobody; the node that loads the partition finds it
	// flagged (Loaded) and does not count it either. Count it, but the
	// group is not served here any more.
	Late bool `json:"-"`
}

// WaitingMember is a member a rebalance in progress waits for.
type WaitingMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id,omitempty"`
	ClientHost string `json:"client_host,omitempty"`
	// Phase: "join" (has not rejoined), "sync" (has not sent SyncGroup;
	// for the leader: the assignment), "revoke" (consumer: still owns
	// partitions it must give up), "assign" (consumer: has not
	// acknowledged its new epoch), "away" (consumer: a static member that
	// left for a restart with epoch -2; its partitions wait for its
	// instance id until Deadline, its session's end; Since is zero when
	// unknown, after a load).
	Phase string    `json:"phase"`
	Since time.Time `json:"since"`
	// Deadline is when the timeout (rebalance or session) evicts it; nil
	// when nothing will.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Waiting is the "now" view of a group that is not Stable.
type Waiting struct {
	State string `json:"state"`
	// Since is when the rebalance in progress started. When every member
	// listed is "away" no rebalance is in progress (the group is
	// Reconciling only for its static members away): Since is then when
	// the first of them left (zero if unknown) and Cause is nil.
	Since time.Time `json:"since"`
	// Cause is what started it (nil if unknown, e.g. right after a load).
	Cause *Cause `json:"cause,omitempty"`
	// OnlyAway is set when no rebalance is in progress and only static
	// members away for a restart keep the group from Stable: it says so
	// even when HistoryListsTag leaves every member out of Members.
	OnlyAway bool            `json:"only_away,omitempty"`
	Members  []WaitingMember `json:"members"`
	// OmittedMembers counts the members HistoryListsTag left out.
	OmittedMembers int `json:"omitted_members,omitempty"`
}

// HistoryDoc is the value of HistoryTag in a DescribeGroups answer.
type HistoryDoc struct {
	Version int    `json:"version"`
	Group   string `json:"group"`
	Type    string `json:"type"` // classic or consumer
	State   string `json:"state"`
	// History holds the latest events, oldest first.
	History []RebalanceEvent `json:"history"`
	Storm   StormStatus      `json:"storm"`
	// Waiting is set when the group is not Stable (nor Empty).
	Waiting *Waiting `json:"waiting,omitempty"`
	// Withheld: the history names topics the asker may not describe, and
	// only Version, Group, Type and State are given (WithholdHistory).
	Withheld bool `json:"withheld,omitempty"`
	// HistoryOff: the node records no history (Config.HistorySize < 0,
	// cohort serve --group-history 0), so History is empty and Storm
	// counts nothing whatever the group did. Left out when false (and
	// by nodes before it).
	HistoryOff bool `json:"history_off,omitempty"`
}

// RequestHistory asks, in req, for the history of each group: at most n of
// the latest events (n < 0: all kept). It needs a flexible version (v5+).
func RequestHistory(req *kmsg.DescribeGroupsRequest, n int32) {
	req.UnknownTags.Set(HistoryTag, kbin.AppendInt32(nil, n))
}

// HistoryRequested reports whether req asks for the history, and how many
// events.
func HistoryRequested(req *kmsg.DescribeGroupsRequest) (n int32, ok bool) {
	if req.Version < 5 {
		return 0, false
	}
	req.UnknownTags.Each(func(key uint32, val []byte) {
		if key != HistoryTag || len(val) != 4 {
			return
		}
		n, ok = int32(binary.BigEndian.Uint32(val)), true
	})
	return n, ok
}

// RequestHistoryLists asks, in req (beside RequestHistory), for at most m
// entries in each list of the history's events and waiting view.
func RequestHistoryLists(req *kmsg.DescribeGroupsRequest, m int32) {
	req.UnknownTags.Set(HistoryListsTag, kbin.AppendInt32(nil, m))
}

// HistoryListsRequested reports whether req bounds the history's lists
// (HistoryListsTag), and to how many entries.
func HistoryListsRequested(req *kmsg.DescribeGroupsRequest) (m int32, ok bool) {
	if req.Version < 5 {
		return 0, false
	}
	req.UnknownTags.Each(func(key uint32, val []byte) {
		if key != HistoryListsTag || len(val) != 4 {
			return
		}
		m, ok = int32(binary.BigEndian.Uint32(val)), true
	})
	return m, ok && m >= 0
}

// BoundLists keeps at most m entries in each list of doc's events and
// waiting view and counts the others in Omitted (HistoryListsTag), added to
// what the stored bound already left out. The events are copied: the lists
// they share with the shard's are not changed.
func (d *HistoryDoc) BoundLists(m int) {
	cut := func(n int) int { return max(0, n-m) }
	evs := make([]RebalanceEvent, len(d.History))
	for i, e := range d.History {
		var changed []MemberChange
		for _, mc := range e.Members {
			if memberChanged(&mc) {
				changed = append(changed, mc)
			}
		}
		var o Omitted
		if e.Omitted != nil {
			o = *e.Omitted
		}
		o.MoreCauses += cut(len(e.MoreCauses))
		o.WaitedFor += cut(len(e.WaitedFor))
		o.Evicted += cut(len(e.Evicted))
		o.Members += cut(len(changed))
		e.Omitted = nil
		e.MoreCauses = e.MoreCauses[:min(len(e.MoreCauses), m):min(len(e.MoreCauses), m)]
		e.WaitedFor = e.WaitedFor[:min(len(e.WaitedFor), m):min(len(e.WaitedFor), m)]
		e.Evicted = e.Evicted[:min(len(e.Evicted), m):min(len(e.Evicted), m)]
		e.Members = changed[:min(len(changed), m):min(len(changed), m)]
		if o != (Omitted{}) {
			e.Omitted = &o
		}
		evs[i] = e
	}
	d.History = evs
	if w := d.Waiting; w != nil && len(w.Members) > m {
		cw := *w
		cw.OmittedMembers = len(w.Members) - m
		cw.Members = w.Members[:m:m]
		d.Waiting = &cw
	}
}

// SetHistoryTag puts doc into d's HistoryTag.
func SetHistoryTag(d *kmsg.DescribeGroupsResponseGroup, doc *HistoryDoc) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	d.UnknownTags.Set(HistoryTag, b)
	return nil
}

// WithholdHistory replaces the history doc in d's HistoryTag by one that
// says it is withheld: the group, its type and state, nothing else.
func WithholdHistory(d *kmsg.DescribeGroupsResponseGroup, doc *HistoryDoc) {
	// Strings, an int and a bool: encoding cannot fail.
	b, _ := json.Marshal(&HistoryDoc{Version: doc.Version, Group: doc.Group, Type: doc.Type, State: doc.State, Withheld: true})
	d.UnknownTags.Set(HistoryTag, b)
}

// NamesConsumerTopic reports whether the consumer-protocol part of d (its
// consumer-protocol events, and the rebalance in progress of a
// consumer-protocol group) names a topic for which refused is true: in a
// cause's changed topics or a member's gained or lost partitions.
func (d *HistoryDoc) NamesConsumerTopic(refused func(topic string) bool) bool {
	causeNames := func(c *Cause) bool { return slices.ContainsFunc(c.Topics, refused) }
	tpsName := func(tps []TopicPartitions) bool {
		return slices.ContainsFunc(tps, func(tp TopicPartitions) bool { return refused(tp.Topic) })
	}
	for i := range d.History {
		e := &d.History[i]
		if e.Type != "consumer" {
			continue
		}
		if causeNames(&e.Cause) {
			return true
		}
		for j := range e.MoreCauses {
			if causeNames(&e.MoreCauses[j]) {
				return true
			}
		}
		for _, m := range e.Members {
			if tpsName(m.Added) || tpsName(m.Removed) {
				return true
			}
		}
	}
	return d.Type == "consumer" && d.Waiting != nil && d.Waiting.Cause != nil && causeNames(d.Waiting.Cause)
}

// HistoryTagOf reads the HistoryDoc of d; ok is false when d has no such tag
// (not asked for, not cohort, a version before v5) or it does not decode.
func HistoryTagOf(d *kmsg.DescribeGroupsResponseGroup) (doc *HistoryDoc, ok bool) {
	d.UnknownTags.Each(func(key uint32, val []byte) {
		if key != HistoryTag {
			return
		}
		var hd HistoryDoc
		if json.Unmarshal(val, &hd) == nil {
			doc, ok = &hd, true
		}
	})
	return doc, ok
}
