package group

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/consumer/serverassign"
)

// Kafka error codes of the consumer protocol.
const (
	ErrUnsupportedVersion       int16 = 35
	ErrFencedMemberEpoch        int16 = 110
	ErrUnreleasedInstanceID     int16 = 111
	ErrUnsupportedAssignor      int16 = 112
	ErrStaleMemberEpoch         int16 = 113
	ErrInvalidRegularExpression int16 = 128
)

// hbReq is a ConsumerGroupHeartbeat being handled, with what it changed.
type hbReq struct {
	req  *kmsg.ConsumerGroupHeartbeatRequest
	c    Client
	now  time.Time
	recs []rec
	// owned is the request's TopicPartitions by topic name (nil when the
	// request sent null: "unchanged").
	owned tpset
	// subscriptionChanged: an existing member changed its subscription.
	subscriptionChanged bool
	// assignedChanged: the member's assigned partitions changed
	// (reconcile).
	assignedChanged bool
	// out receives replies to other requests a change answers (parked
	// classic requests of a group being converted).
	out *Output
	// causes are the rebalance triggers noted so far (historycg.go).
	causes []Cause
}

// emit replays r at once and keeps it for the write.
func (g *Group) emit(h *hbReq, r rec) {
	pre := g.cBefore(&r)
	g.s.replay(&r, false)
	h.recs = append(h.recs, r)
	g.cObserve(h, &r, pre)
}

// ConsumerGroupHeartbeat handles a ConsumerGroupHeartbeat (KIP-848): join,
// heartbeat, reconcile, leave. See docs/kip848.md.
func (s *Shard) ConsumerGroupHeartbeat(now time.Time, t Ticket, c Client, req *kmsg.ConsumerGroupHeartbeatRequest, out *Output) {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	fail := func(code int16, msg string) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		out.reply(t, resp)
	}
	if code, msg := s.validateHeartbeat(req); code != ErrNone {
		fail(code, msg)
		return
	}
	h := &hbReq{req: req, c: c, now: now, out: out}
	var code int16
	var msg string
	var m *cmember
	var g *Group
	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStatic {
		g, m, code, msg = s.consumerLeave(h)
	} else {
		g, m, code, msg = s.consumerHeartbeat(h)
	}
	if code != ErrNone {
		// A refused heartbeat changes nothing (the checks come before any
		// record); a failure after records were emitted cannot happen.
		fail(code, msg)
		return
	}
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	if req.MemberEpoch == epochLeave {
		resp.MemberEpoch = epochLeave
	}
	if req.MemberEpoch >= 0 {
		// A leave's answer carries no interval (0), as Kafka's: the
		// member will not heartbeat again.
		resp.HeartbeatIntervalMillis = int32(s.heartbeatInterval(g, m, h).Milliseconds())
	}
	if req.MemberEpoch >= 0 && h.wantsAssignment() {
		resp.Assignment = s.assignmentOf(m)
	}
	if len(h.recs) == 0 {
		out.reply(t, resp)
		return
	}
	_ = g
	s.writeApplied(out, h.recs, func(_ time.Time, code int16, out *Output) {
		if code != ErrNone {
			resp.ErrorCode, resp.MemberEpoch, resp.Assignment, resp.MemberID = code, 0, nil, nil
		}
		out.reply(t, resp)
	})
}

// heartbeatInterval is the interval a heartbeat answer gives: the
// configured one while the group is Stable (or only static members away keep
// it from being so: converging), shorter during a rebalance. A
// member learns that it must give up or may take partitions only from a
// heartbeat answer, so during a rebalance shorter intervals let the
// members converge in a few short rounds instead of a few full intervals;
// once the group is Stable they heartbeat at the normal pace again.
// Clients take the interval from every answer (a deliberate difference
// from Kafka, whose interval is fixed; docs/kip848.md).
//
// While the group is not Stable, an answer gives the time since the
// member's current assignment last changed (its epoch, state or
// partitions: reconcile notes it in changedAt), at least ConsumerRebalanceHeartbeatMin and at most
// ConsumerRebalanceHeartbeatInterval: a member that just moved asks again
// soon, when what it waits for (a holder's revocation, the target of a
// member that joined after it) is likely to be there, and a member with
// nothing to do backs off exponentially. A rebalance thus costs each
// member a few extra heartbeats, not a steady fast poll.
func (s *Shard) heartbeatInterval(g *Group, m *cmember, h *hbReq) time.Duration {
	live := g != nil && g.cg != nil && m != nil && h.req.MemberEpoch >= 0 && g.cg.members[m.id] == m
	if live && m.changedAt.IsZero() {
		m.changedAt = h.now
	}
	d := s.cfg.ConsumerHeartbeatInterval
	if g != nil {
		d = s.heartbeatFor(g.id)
	}
	r := s.cfg.ConsumerRebalanceHeartbeatInterval
	if g == nil || g.cg == nil || r <= 0 || r >= d || !g.cg.converging() {
		return d
	}
	first := s.cfg.ConsumerRebalanceHeartbeatMin
	if first <= 0 || first >= r || !live {
		return r
	}
	return min(max(h.now.Sub(m.changedAt), first), r)
}

// wantsAssignment reports whether the response carries the member's
// assignment: on a join, on a full request (after an error the client sends
// everything and expects everything back), and whenever its assigned
// partitions changed in this heartbeat (not for an epoch alone, as Kafka).
func (h *hbReq) wantsAssignment() bool {
	r := h.req
	if r.MemberEpoch == epochJoining {
		return true
	}
	full := r.RebalanceTimeoutMillis != -1 && (r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil) && r.Topics != nil
	return full || h.assignedChanged
}

// assignmentOf returns m's usable partitions as a heartbeat answers them:
// assigned, never those pending revocation.
func (s *Shard) assignmentOf(m *cmember) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, name := range m.assigned.topics() {
		topic, ok := s.cfg.Topics.Lookup(name)
		if !ok {
			continue
		}
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID = topic.ID
		at.Partitions = slices.Clone(m.assigned[name])
		a.Topics = append(a.Topics, at)
	}
	return a
}

// validateHeartbeat applies the checks Kafka makes before looking at any
// state (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION).
func (s *Shard) validateHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	blank := func(x string) bool { return javaTrim(x) == "" }
	switch { // in Kafka's order
	case blank(r.MemberID) && (r.Version >= 1 || r.MemberEpoch > 0 || r.MemberEpoch == epochLeave):
		return ErrInvalidRequest, "MemberId can't be empty."
	case blank(r.Group):
		return ErrInvalidRequest, "GroupId can't be empty."
	case r.InstanceID != nil && blank(*r.InstanceID):
		return ErrInvalidRequest, "InstanceId can't be empty."
	case r.RackID != nil && blank(*r.RackID):
		return ErrInvalidRequest, "RackId can't be empty."
	case r.MemberEpoch < epochStatic:
		return ErrInvalidRequest, "MemberEpoch is invalid."
	case r.MemberEpoch == epochStatic && r.InstanceID == nil && !s.isStaticMember(r.Group, r.MemberID):
		// Kafka requires the InstanceId of a -2 leave; franz-go omits it
		// (it sends only the member id), so cohort accepts a -2 leave
		// whose member id is a static member's (docs/kip848.md). A member
		// id the group does not know (its session expired, or it never
		// joined) is answered UNKNOWN_MEMBER_ID: the member is gone, and
		// franz-go's Close takes that as a completed leave where
		// INVALID_REQUEST made it fail.
		if !s.isMember(r.Group, r.MemberID) {
			return ErrUnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", r.MemberID, r.Group)
		}
		return ErrInvalidRequest, "InstanceId can't be null."
	}
	if r.MemberEpoch == epochJoining {
		switch {
		case r.RebalanceTimeoutMillis == -1:
			return ErrInvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		case r.Topics == nil || len(r.Topics) > 0:
			return ErrInvalidRequest, "TopicPartitions must be empty when (re-)joining."
		case r.SubscribedTopicNames == nil && r.SubscribedTopicRegex == nil:
			return ErrInvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
		}
	}
	if r.ServerAssignor != nil && !slices.Contains(s.cfg.ConsumerAssignors, *r.ServerAssignor) {
		return ErrUnsupportedAssignor, "ServerAssignor " + *r.ServerAssignor + " is not supported. Supported assignors: " +
			strings.Join(s.cfg.ConsumerAssignors, ", ") + "."
	}
	return ErrNone, ""
}

// javaTrim removes what Kafka's String.trim() removes: every character up
// to U+0020 (spaces and control characters) at either end, and nothing
// else (strings.TrimSpace also removes Unicode spaces such as U+00A0, and
// keeps control characters).
func javaTrim(x string) string {
	return strings.TrimFunc(x, func(r rune) bool { return r <= ' ' })
}

// isMember reports whether member is a member of the consumer group.
func (s *Shard) isMember(group, member string) bool {
	g := s.groups[group]
	return g != nil && g.cg != nil && g.cg.members[member] != nil
}

func (s *Shard) isStaticMember(group, member string) bool {
	g := s.groups[group]
	if g == nil || g.cg == nil {
		return false
	}
	m := g.cg.members[member]
	return m != nil && m.instanceID != ""
}

// regexRefusal refuses (INVALID_REGULAR_EXPRESSION) a request whose
// SubscribedTopicRegex does not parse; cg, if not nil, is the consumer
// group whose parsed regexes are looked up first.
func (s *Shard) regexRefusal(cg *consumerGroup, r *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	if re := strOr(r.SubscribedTopicRegex); re != "" && !s.validRegex(cg, re) {
		return ErrInvalidRegularExpression, "SubscribedTopicRegex `" + re + "` is not a valid regular expression: " + regexProblem(re) + "."
	}
	return ErrNone, ""
}

// consumerHeartbeat handles a heartbeat with MemberEpoch >= 0.
func (s *Shard) consumerHeartbeat(h *hbReq) (*Group, *cmember, int16, string) {
	r := h.req
	g := s.groups[r.Group]
	switch {
	case g != nil && g.state == Dead:
		return nil, nil, ErrCoordinatorNotAvailable, ""
	case r.MemberEpoch > 0 && (g == nil || g.cg == nil):
		return nil, nil, ErrGroupIDNotFound, "Group " + r.Group + " not found."
	case g != nil && g.cg == nil && len(g.members) > 0:
		// A classic group with members: online upgrade, if allowed.
		if why := g.upgradeRefusal(); why != "" {
			return nil, nil, ErrGroupIDNotFound, "Group " + r.Group + " cannot become a consumer group: " + why + "."
		}
		if r.MemberEpoch != epochJoining {
			return nil, nil, ErrGroupIDNotFound, "Group " + r.Group + " not found."
		}
		if most := s.cfg.ConsumerMaxSize; most > 0 && len(g.members) >= most {
			// Upgradable, but the joiner would be one too many: as Kafka,
			// whose converted group then refuses the joiner.
			return nil, nil, ErrGroupMaxSizeReached, "The consumer group has reached its maximum capacity of " + strconv.Itoa(s.cfg.ConsumerMaxSize) + " members."
		}
		if code, msg := s.regexRefusal(nil, r); code != ErrNone {
			// Refused after the conversion too: refused before it, so that
			// the group stays classic and untouched (Kafka drops the
			// conversion's records with those of the refused heartbeat;
			// upgradeToConsumer changes the live group at once).
			return nil, nil, code, msg
		}
		if msg := g.upgradeRecordRefusal(h); msg != "" {
			return nil, nil, ErrUnknownServer, msg // as above: before the conversion
		}
		g.upgradeToConsumer(h)
	}
	var cg *consumerGroup
	if g != nil && g.cg != nil {
		cg = g.cg
	}
	instance := strOr(r.InstanceID)
	var m *cmember
	var replaced *cmember // a static member this join takes over
	if cg != nil && r.MemberEpoch > 0 && cg.members[r.MemberID] == nil && !cg.hasStaticMember(instance) &&
		s.cfg.ConsumerMaxSize > 0 && len(cg.members) >= s.cfg.ConsumerMaxSize {
		// Kafka checks the group's size before it looks the member up,
		// unless the instance id is an existing static member's: the
		// request then replaces that member or is refused for the
		// instance (a zombie of a replaced member: FENCED_INSTANCE_ID),
		// and the group does not grow either way.
		return nil, nil, ErrGroupMaxSizeReached, "The consumer group has reached its maximum capacity of " + strconv.Itoa(s.cfg.ConsumerMaxSize) + " members."
	}
	if cg != nil {
		if instance == "" {
			m = cg.members[r.MemberID]
		} else if owner, ok := cg.static[instance]; ok {
			o := cg.members[owner]
			switch {
			case r.MemberEpoch == epochJoining && owner == r.MemberID && o.epoch != epochStatic:
				m = o // a static member rejoining with its own id: in place
			case r.MemberEpoch == epochJoining && o.epoch != epochStatic && o.classic == nil:
				// An active consumer-protocol member holds the instance;
				// a classic one is replaced (a rolling upgrade of static
				// members), as in Kafka.
				return nil, nil, ErrUnreleasedInstanceID, "Static member " + r.MemberID + " with instance id " + instance +
					" cannot join the group because the instance id is owned by " + owner + " member."
			case r.MemberEpoch == epochJoining:
				// The instance's member left for a restart (epoch -2) or
				// is a classic member: this join takes its place at
				// epoch 0 with what it says it owns, as Kafka does, also
				// when it comes back with the same member id (kept in
				// place, it stayed at -2: its next heartbeat read as
				// another leave, and it never reconciled).
				replaced = o
			case owner != r.MemberID:
				return nil, nil, ErrFencedInstanceID, "Static member " + r.MemberID + " with instance id " + instance + " was fenced by member " + owner + "."
			default:
				m = o
			}
		} else if r.MemberEpoch > 0 {
			return nil, nil, ErrUnknownMemberID, "Instance id " + instance + " is unknown."
		} else if known := cg.members[r.MemberID]; known != nil {
			// A known member joining with an instance id no member
			// holds (a dynamic member turned static, or a static one
			// renamed) is the same member, updated in place: the new
			// instance id names it from its member record on, the old
			// one no longer does. Kafka finds it by id so as well.
			m = known
		}
		if m == nil && instance != "" && r.MemberEpoch > 0 {
			return nil, nil, ErrUnknownMemberID, ""
		}
	}
	if m == nil && r.MemberEpoch > 0 {
		return nil, nil, ErrUnknownMemberID, "Member " + r.MemberID + " is not a member of group " + r.Group + "."
	}
	if m == nil && replaced == nil && s.cfg.ConsumerMaxSize > 0 && cg != nil && len(cg.members) >= s.cfg.ConsumerMaxSize {
		return nil, nil, ErrGroupMaxSizeReached, "The consumer group has reached its maximum capacity of " + strconv.Itoa(s.cfg.ConsumerMaxSize) + " members."
	}
	h.owned = s.resolveOwned(r, m)
	if m != nil && r.MemberEpoch == epochJoining {
		// A known member rejoining at epoch 0 is let in at its current
		// state (franz-go rejoins so with its id after a fence; Kafka
		// lets it in too since KAFKA-19233), but what it says it owns does not
		// release partitions it is asked to revoke (Kafka's does): the
		// request may be a late or repeated join while the member still
		// works on them, which would hand them to another member at once.
		// Its next heartbeat at its epoch releases them.
		h.owned = nil
	}
	if m != nil && r.MemberEpoch > 0 {
		if code := checkMemberEpoch(m, r.MemberEpoch, r.Topics); code != ErrNone {
			than := "smaller"
			if r.MemberEpoch > m.epoch {
				than = "greater"
			}
			return nil, nil, code, "The consumer group member has a " + than + " member epoch (" + strconv.Itoa(int(r.MemberEpoch)) +
				") than the one known by the group coordinator (" + strconv.Itoa(int(m.epoch)) + "). The member must abandon all its partitions and rejoin."
		}
	}
	if code, msg := s.regexRefusal(cg, r); code != ErrNone {
		return nil, nil, code, msg
	}
	// The member's metadata record must fit the store. An ordinary
	// heartbeat (every field null, the same client) leaves it as it is:
	// not counted again.
	if m == nil || replaced != nil || r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil || r.InstanceID != nil ||
		r.RackID != nil || r.ServerAssignor != nil || h.c.ID != m.clientID || h.c.Host != m.clientHost || h.c.Principal != m.principal {
		var next cmember
		switch {
		case m != nil:
			next = *m
		case replaced != nil:
			next = *replaced
		}
		heartbeatFields(&next, h)
		idLen := len(r.MemberID)
		if idLen == 0 {
			idLen = generatedIDLen("") - 1 // see below
		}
		if msg := s.memberRecordRefusal(h.now, r.Group, idLen, &next); msg != "" {
			return nil, nil, ErrUnknownServer, msg
		}
	}

	// Accepted: from here on, changes are records.
	if g == nil || g.cg == nil {
		if g == nil {
			g = s.newGroup(r.Group, h.now)
		}
		// A new consumer group, or an empty classic group (perhaps only
		// offsets) replaced by one: its offsets stay. The consumer
		// group's record comes first: replayed before it, the classic
		// record's tombstone would remove a group without offsets from
		// the shard while this heartbeat still works on it.
		g.emit(h, cGroupRec(g.id, 0, 0))
		if g.persisted || g.metaWrites > 0 { // one on its way too (upgradeToConsumer)
			g.emit(h, groupTombstone(g.id))
		}
		// Nothing of the classic group is left (Kafka deletes it): a
		// later JoinGroup that turns the group classic again starts a
		// new group at generation 0, as after a load.
		for id, pt := range g.pending {
			s.cancel(pt)
			delete(g.pending, id)
		}
		s.cancel(g.joinTimer)
		s.cancel(g.syncTimer)
		g.joinTimer, g.syncTimer = nil, nil
		g.state, g.protocol, g.leader, g.generation = Empty, "", "", 0
	}
	cg = g.cg
	id := r.MemberID
	if id == "" {
		// A v0 join: the coordinator names the member, whether it is new
		// or takes over a static member's place (Kafka generates the id
		// before it looks the member up).
		id = s.newMemberID("")[1:]
	}
	if replaced != nil {
		m = g.replaceStaticConsumer(h, replaced, id)
	}
	isNew := m == nil
	if isNew {
		m = &cmember{id: id, epoch: epochJoining, assigned: tpset{}, pending: tpset{}}
	}
	if code := g.bumpAndAssign(h, g.updateConsumerMember(h, m, isNew), true); code != ErrNone {
		return nil, nil, code, "Failed to compute the target assignment."
	}
	m = cg.members[m.id]
	g.reconcile(h, m)
	s.armSession(m, h.now, s.sessionFor(g.id))
	return g, m, ErrNone, ""
}

// bumpAndAssign bumps the group epoch if a member change asked for it
// (bump) or the subscribed topics' metadata changed, and computes a new
// target if the target is behind the group epoch. With mayDefer (a
// consumer-protocol heartbeat) the computation waits until the group's
// assignment wait since the last one has passed (Shard.assignWait): a timer
// computes it then, or an earlier heartbeat that finds the wait over.
// Meanwhile members reconcile against the previous target, as Kafka's
// members do between two computations under KIP-1263. A classic member's
// JoinGroup computes at once: it learns its assignment only from the
// SyncGroup that follows, and a deferred target would cost it a rejoin.
func (g *Group) bumpAndAssign(h *hbReq, bump, mayDefer bool) int16 {
	cg := g.cg
	changed := g.refreshMetadataHash()
	g.cNoteTopics(h, changed) // rebalance history
	if changed {
		bump = true
	}
	if bump {
		g.emit(h, cGroupRec(g.id, cg.epoch+1, cg.hash))
	}
	if cg.assignEpoch >= cg.epoch {
		return ErrNone
	}
	if cg.holdsUnresolved(g.s.cfg.Topics) {
		// The first heartbeat after the matching computes it.
		return ErrNone
	}
	if mayDefer && !cg.assignedAt.IsZero() {
		if at := cg.assignedAt.Add(g.s.assignWait(g.id, len(cg.members))); h.now.Before(at) {
			g.deferTarget(at)
			return ErrNone
		}
	}
	return g.assignNow(h)
}

// assignWait is how long a group of n members waits after a target
// computation before the next (Config.ConsumerAssignmentInterval). A group's
// own consumer.assignment.interval.ms is the wait itself, whatever the
// group's size, as the interval is in Kafka; the node's setting is the
// longest wait, scaled down for small groups.
func (s *Shard) assignWait(group string, n int) time.Duration {
	if o := s.overrides(group); o.HasAssignmentInterval {
		return o.AssignmentInterval
	}
	per, most := s.cfg.ConsumerAssignmentDelayPerMember, s.cfg.ConsumerAssignmentInterval
	if per <= 0 || most <= 0 {
		return 0
	}
	return min(time.Duration(n)*per, most)
}

// assignNow computes the target and notes when.
func (g *Group) assignNow(h *hbReq) int16 {
	cg := g.cg
	g.s.cancel(cg.assignTimer)
	if code := g.computeTarget(h); code != ErrNone {
		return code
	}
	cg.assignedAt = h.now
	return ErrNone
}

// deferTarget arms the group's timer to compute the target at at.
func (g *Group) deferTarget(at time.Time) {
	cg := g.cg
	if cg.assignTimer == nil {
		cg.assignTimer = newTimer(func(now time.Time, out *Output) { g.onAssignTimer(cg, now, out) })
	}
	if !cg.assignTimer.armed() {
		g.s.arm(cg.assignTimer, at)
	}
}

// onAssignTimer computes a deferred target, if the group (still the same
// consumer group) still needs it. Members learn it from their next
// heartbeat.
func (g *Group) onAssignTimer(cg *consumerGroup, now time.Time, out *Output) {
	if g.cg != cg || g.s.groups[g.id] != g || cg.assignEpoch >= cg.epoch || len(cg.members) == 0 || cg.holdsUnresolved(g.s.cfg.Topics) {
		return
	}
	h := &hbReq{now: now, out: out}
	if code := g.assignNow(h); code != ErrNone {
		g.s.logf("group %q: the deferred target computation failed: %s", g.id, codeText(code))
	}
	if len(h.recs) > 0 {
		g.s.writeApplied(out, h.recs, g.logFailure("deferred target"))
	}
}

// memberUpdate is what a classic JoinGroup sets on its member.
type memberUpdate struct {
	instanceID, rack string
	rebalance        time.Duration
	names            []string
	classic          *classicMeta
}

// applyMemberUpdate stores a classic member's JoinGroup fields (see
// storeMember).
func (g *Group) applyMemberUpdate(h *hbReq, m *cmember, isNew bool, u memberUpdate) bool {
	next := *m
	classicFields(&next, h.c, u)
	return g.storeMember(h, m, &next, isNew)
}

// classicFields applies a classic member's JoinGroup fields to next.
func classicFields(next *cmember, c Client, u memberUpdate) {
	next.clientID, next.clientHost = c.ID, c.Host
	next.instanceID, next.rack, next.rebalanceTimeout, next.names, next.classic = u.instanceID, u.rack, u.rebalance, u.names, u.classic
	next.regex, next.assignor, next.principal = "", "", ""
}

// resolveOwned returns the request's owned partitions (TopicPartitions) by
// topic name, nil when the request sent null ("unchanged"). A topic id the
// catalog no longer knows (the topic was deleted) still resolves if the
// member holds partitions of a topic with that id: cohort derives topic ids
// from names, so a topic deleted and created again has the same id, and the
// member must keep counting as the holder of the old partitions until it
// stops listing them, or they could reach a new owner while it still works
// on them.
func (s *Shard) resolveOwned(r *kmsg.ConsumerGroupHeartbeatRequest, m *cmember) tpset {
	if r.Topics == nil {
		return nil
	}
	owned := tpset{}
	for _, tp := range r.Topics {
		name := ""
		if topic, ok := s.cfg.Topics.LookupID(tp.TopicID); ok {
			name = topic.Name
		} else if m != nil {
			for _, held := range []tpset{m.assigned, m.pending} {
				for t := range held {
					if catalog.TopicID(t) == tp.TopicID {
						name = t
					}
				}
			}
		}
		if name == "" {
			continue
		}
		owned.addAll(name, tp.Partitions)
	}
	return owned
}

// checkMemberEpoch fences a heartbeat whose epoch does not match the
// member's: a higher epoch is fenced, a lower one is accepted only as the
// retry of a heartbeat whose answer was lost (the previous epoch, with the
// owned partitions it lists, by topic id, all still assigned to the member;
// a listed topic the member is not assigned, even with no partitions or an
// id no topic has, fences it, as in Kafka).
func checkMemberEpoch(m *cmember, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) int16 {
	switch {
	case epoch == m.epoch:
		return ErrNone
	case epoch > m.epoch:
		return ErrFencedMemberEpoch
	case epoch == m.prevEpoch && owned != nil:
		for _, tp := range owned {
			name, ok := m.assignedTopic(tp.TopicID)
			if !ok {
				return ErrFencedMemberEpoch
			}
			for _, p := range tp.Partitions {
				if !m.assigned.has(name, p) {
					return ErrFencedMemberEpoch
				}
			}
		}
		return ErrNone
	}
	return ErrFencedMemberEpoch
}

// assignedTopic is the name of the topic of id among those m is assigned.
func (m *cmember) assignedTopic(id [16]byte) (string, bool) {
	for t := range m.assigned {
		if catalog.TopicID(t) == id {
			return t, true
		}
	}
	return "", false
}

// updateConsumerMember applies the request's non-null fields to m (a new
// member is created) and writes its metadata record if anything changed.
// It reports whether the group epoch must be bumped: a new member with a
// subscription, a changed subscription, or a changed preferred assignor.
func (g *Group) updateConsumerMember(h *hbReq, m *cmember, isNew bool) bool {
	next := *m
	heartbeatFields(&next, h)
	return g.storeMember(h, m, &next, isNew)
}

// heartbeatFields applies the heartbeat's member fields to next: its
// client, and the request's non-null fields.
func heartbeatFields(next *cmember, h *hbReq) {
	r := h.req
	next.clientID, next.clientHost, next.principal = h.c.ID, h.c.Host, h.c.Principal
	if r.InstanceID != nil {
		next.instanceID = *r.InstanceID
	}
	if r.RackID != nil {
		next.rack = *r.RackID
	}
	if r.RebalanceTimeoutMillis != -1 {
		next.rebalanceTimeout = time.Duration(r.RebalanceTimeoutMillis) * time.Millisecond
	}
	if r.SubscribedTopicNames != nil {
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		next.names = slices.Compact(names)
	}
	if r.SubscribedTopicRegex != nil {
		next.regex = *r.SubscribedTopicRegex
	}
	if r.ServerAssignor != nil {
		next.assignor = *r.ServerAssignor
	}
	next.classic = nil
}

// storeMember writes next as m's metadata if it differs (a new member also
// gets its empty current assignment) and reports whether the group epoch
// must be bumped: a new member with a subscription, a changed subscription,
// or a changed preferred assignor.
func (g *Group) storeMember(h *hbReq, m, next *cmember, isNew bool) bool {
	cg := g.cg
	subChanged := !slices.Equal(next.names, m.names) || next.regex != m.regex
	changed := isNew || subChanged || next.instanceID != m.instanceID || next.rack != m.rack ||
		next.rebalanceTimeout != m.rebalanceTimeout || next.assignor != m.assignor ||
		next.clientID != m.clientID || next.clientHost != m.clientHost || next.principal != m.principal ||
		!sameClassic(next.classic, m.classic)
	if !changed {
		return false
	}
	before := cg.preferredAssignor(g.s.cfg.ConsumerAssignors)
	prev := *m // rebalance history: the emit below updates m
	g.emit(h, cMemberRec(g.id, next))
	if isNew {
		g.emit(h, cCurrentRec(g.id, next.id, &ccurrent{epoch: epochJoining, prevEpoch: epochJoining, state: mStable,
			assigned: tpset{}, pending: tpset{}, assignedAt: map[topicPartition]int32{}}))
	}
	after := cg.preferredAssignor(g.s.cfg.ConsumerAssignors)
	g.cNoteMember(h, &prev, next, isNew, subChanged, before != after) // rebalance history
	h.subscriptionChanged = subChanged && !isNew
	if before != after {
		// The target must be computed with the group's new assignor, also
		// when a new member's vote changed it (as Kafka, which compares the
		// group's assignor before and after any member's update).
		return true
	}
	if isNew {
		return len(next.names) > 0 || next.regex != ""
	}
	return subChanged
}

// refreshMetadataHash recomputes the hash of the subscribed topics'
// metadata when the catalog or the subscriptions may have changed; a
// different hash needs a new target (true).
func (g *Group) refreshMetadataHash() bool {
	cg := g.cg
	topics := g.s.cfg.Topics
	v, av := topics.Version(), cg.accessVersion()
	if v == cg.hashVersion && av == cg.hashAccess && !cg.subsDirty {
		return false
	}
	if cg.holdsUnresolved(topics) {
		return false // computed again once the matching is in (RegexResolved)
	}
	cg.hashVersion, cg.hashAccess, cg.subsDirty = v, av, false
	h := cg.accessHash(metadataHash(cg.subscribed(topics), topics), topics)
	if h == cg.hash {
		return false
	}
	cg.hash = h
	return true
}

// computeTarget runs the group's assignor and writes the new target: the
// changed members' targets, then the target epoch.
func (g *Group) computeTarget(h *hbReq) int16 {
	cg := g.cg
	topics := g.s.cfg.Topics
	a, ok := serverassign.ByName(cg.preferredAssignor(g.s.cfg.ConsumerAssignors))
	if !ok {
		return ErrUnknownServer
	}
	members := cg.assignorMembers(topics)
	meta := map[string]serverassign.Topic{}
	for _, m := range members {
		for _, name := range m.Topics {
			if _, ok := meta[name]; !ok {
				t, _ := topics.Lookup(name)
				meta[name] = serverassign.Topic{Name: name, Partitions: t.Partitions, Racks: t.Racks}
			}
		}
	}
	prev := make(serverassign.Plan, len(cg.target))
	for id, set := range cg.target {
		prev[id] = set
	}
	plan, err := a.Assign(members, meta, prev)
	if err != nil {
		g.s.logf("group %q: assignor %s failed: %v", g.id, a.Name(), err)
		return ErrUnknownServer
	}
	for _, id := range cg.ids {
		next := tpset{}
		for t, ps := range plan[id] {
			if len(ps) > 0 {
				next[t] = slices.Clone(ps)
				slices.Sort(next[t])
			}
		}
		if !next.equal(cg.target[id]) {
			g.emit(h, cTargetRec(g.id, id, next))
		}
	}
	g.emit(h, cTMetaRec(g.id, cg.epoch))
	return ErrNone
}
