package group

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Migration between the classic and the consumer protocol (Kafka's
// group.consumer.migration.policy): a consumer-protocol member joining a
// classic consumer group converts it (upgrade); classic members joining a
// consumer-protocol group are served from its state (mixed group); when the
// last consumer-protocol member leaves a mixed group, it turns classic again
// (downgrade). Offsets are never touched: they belong to the group id.

// Migration policies (group.consumer.migration.policy).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

func (s *Shard) upgradeAllowed() bool {
	p := strings.ToLower(s.cfg.ConsumerMigrationPolicy)
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (s *Shard) downgradeAllowed() bool {
	p := strings.ToLower(s.cfg.ConsumerMigrationPolicy)
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// classicMeta is what a classic member of a consumer-protocol group keeps of
// its JoinGroup: its session timeout and its protocols (for the SyncGroup
// answer's format and a later downgrade).
type classicMeta struct {
	session   time.Duration
	protocols []kmsg.JoinGroupRequestProtocol
}

// maxSubscribedTopics is the most topics a classic member's subscription
// may list in a consumer-protocol group, the bound the server puts on a
// ConsumerGroupHeartbeat's subscribed topic names (server/entrylimit.go):
// every name is kept with the member and gone over by each target
// computation of its group.
const maxSubscribedTopics = 100_000

// parseSubscription decodes a consumer-protocol subscription (JoinGroup
// metadata): topics, owned partitions and rack. One listing more than
// maxSubscribedTopics topics does not parse; its count is read before
// anything is decoded.
func parseSubscription(b []byte) (*kmsg.ConsumerMemberMetadata, bool) {
	// Every version starts with an int16 version and the topics' int32
	// count (ConsumerProtocol has no flexible version).
	if len(b) >= 6 && int32(binary.BigEndian.Uint32(b[2:])) > maxSubscribedTopics {
		return nil, false
	}
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(b); err != nil {
		return nil, false
	}
	return &md, true
}

// parseAssignment decodes a consumer-protocol assignment into a tpset; ok is
// false if it does not decode or carries user data (a custom assignor's
// state, which a server-side assignor would lose: Kafka refuses to upgrade
// such a group).
func parseAssignment(b []byte) (tpset, bool) {
	set := tpset{}
	if len(b) == 0 {
		return set, true
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil || len(a.UserData) > 0 {
		return nil, false
	}
	for _, t := range a.Topics {
		set.addAll(t.Topic, t.Partitions)
	}
	return set, true
}

// encodeAssignment is a consumer-protocol assignment of set, in the
// ConsumerProtocol version of the subscription metadata (at most 3).
func encodeAssignment(set tpset, metadata []byte) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	if md, ok := parseSubscription(metadata); ok {
		a.Version = min(md.Version, 3)
	}
	for _, t := range set.topics() {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t, slices.Clone(set[t])
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// upgradeRefusal says why a classic group with members cannot become a
// consumer-protocol group ("" if it can): the policy, a protocol type other
// than consumer, too many members, or a subscription or assignment Kafka's
// server-side assignors cannot take over.
func (g *Group) upgradeRefusal() string {
	s := g.s
	switch {
	case !s.upgradeAllowed():
		return "the migration policy does not allow upgrades"
	case g.protocolType != "consumer":
		return "its protocol type is " + g.protocolType
	case s.cfg.ConsumerMaxSize > 0 && len(g.members) > s.cfg.ConsumerMaxSize:
		return "it has too many members"
	}
	for _, m := range g.members {
		meta := m.metadataFor(g.protocol)
		if g.protocol == "" && len(m.protocols) > 0 {
			meta = m.protocols[0].Metadata
		}
		if _, ok := parseSubscription(meta); !ok {
			return "a member's subscription does not parse or lists more than " + strconv.Itoa(maxSubscribedTopics) + " topics"
		}
		if _, ok := parseAssignment(m.assignment); !ok {
			return "a member's assignment carries user data or does not parse"
		}
	}
	return ""
}

// upgradeToConsumer turns a classic consumer group with members into a
// consumer-protocol group: parked JoinGroup and SyncGroup requests are
// answered REBALANCE_IN_PROGRESS; the group epoch and target epoch start at
// the generation; each member becomes a classic member of the new group,
// STABLE at that epoch with its last assignment as current and target, and
// keeps its session. The joiner that triggered it then bumps the epoch, so
// the classic members' next heartbeat tells them to rejoin.
func (g *Group) upgradeToConsumer(h *hbReq) {
	g.rbConverted(h.now, "group converted to the consumer protocol", h.out) // rebalance history
	type snap struct {
		m        *member
		cm       *cmember // its protocols cloned: dropMember forgets them
		assigned tpset
	}
	var members []snap
	for _, m := range g.members {
		assigned, _ := parseAssignment(m.assignment)
		members = append(members, snap{m, g.consumerMemberOf(m, cloneProtocols(m.protocols)), assigned})
	}
	gen := g.generation
	for _, sn := range members {
		m := sn.m
		if m.join != nil {
			h.out.reply(m.join.t, joinError(m.join.v, ErrRebalanceInProgress, m.id))
			m.join = nil
			g.awaiting--
		}
		if m.sync != nil {
			h.out.reply(m.sync.t, syncError(m.sync.v, ErrRebalanceInProgress))
			m.sync = nil
		}
		g.dropMember(m, h.out)
	}
	for id, pt := range g.pending {
		g.s.cancel(pt)
		delete(g.pending, id)
	}
	g.s.cancel(g.joinTimer)
	g.s.cancel(g.syncTimer)
	g.joinTimer, g.syncTimer = nil, nil
	g.state, g.protocol, g.leader, g.generation = Empty, "", "", 0
	g.emit(h, cGroupRec(g.id, gen, 0))
	if g.persisted || g.metaWrites > 0 {
		// Also when the classic record is still on its way to the store
		// (a leader's SyncGroup): it lands first, and without this
		// tombstone a load would rebuild the classic group beside the
		// consumer group. Kafka always writes it.
		g.emit(h, groupTombstone(g.id))
	}
	g.emit(h, cTMetaRec(g.id, gen))
	for _, sn := range members {
		m := sn.m
		g.emit(h, cMemberRec(g.id, sn.cm))
		g.emit(h, cTargetRec(g.id, m.id, sn.assigned.clone()))
		at := map[topicPartition]int32{}
		for t, ps := range sn.assigned {
			for _, p := range ps {
				at[topicPartition{t, p}] = gen
			}
		}
		g.emit(h, cCurrentRec(g.id, m.id, &ccurrent{epoch: gen, prevEpoch: gen, state: mStable,
			assigned: sn.assigned, pending: tpset{}, assignedAt: at}))
		g.s.armSession(g.cg.members[m.id], h.now, m.sessionTimeout)
	}
}

// consumerMemberOf is classic member m as upgradeToConsumer makes it a
// member of the consumer group, with protocols as its classic protocols.
func (g *Group) consumerMemberOf(m *member, protocols []kmsg.JoinGroupRequestProtocol) *cmember {
	meta := m.metadataFor(g.protocol)
	if g.protocol == "" && len(m.protocols) > 0 {
		meta = m.protocols[0].Metadata
	}
	cm := &cmember{id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
		rebalanceTimeout: m.rebalanceTimeout, classic: &classicMeta{session: m.sessionTimeout, protocols: protocols}}
	if sub, ok := parseSubscription(meta); ok {
		cm.names, cm.rack = subscriptionNames(sub), strOr(sub.Rack)
	}
	return cm
}

// upgradeRecordRefusal is memberRecordRefusal for the conversion h would
// make of the classic group g: each member's metadata and current
// assignment records, and the joiner's metadata (taking over a member of its
// instance id, if one has it), "" if all fit.
// Checked before the conversion, which changes the group at once.
func (g *Group) upgradeRecordRefusal(h *hbReq) string {
	var joiner cmember
	for _, m := range g.members {
		cm := g.consumerMemberOf(m, m.protocols)
		if msg := g.s.memberRecordRefusal(h.now, g.id, len(cm.id), cm); msg != "" {
			return msg
		}
		// Its current assignment, the classic one with an epoch per
		// partition (the target record, without, is smaller).
		if assigned, ok := parseAssignment(m.assignment); ok {
			if msg := g.s.recordRefusal(h.now, g.id, "assignment", currentRecordBytes(g.id, len(m.id), assigned)); msg != "" {
				return msg
			}
		}
		if h.req.InstanceID != nil && m.instanceID == *h.req.InstanceID {
			joiner = *cm
		}
	}
	heartbeatFields(&joiner, h)
	idLen := len(h.req.MemberID)
	if idLen == 0 {
		idLen = generatedIDLen("") - 1
	}
	return g.s.memberRecordRefusal(h.now, g.id, idLen, &joiner)
}

func subscriptionNames(sub *kmsg.ConsumerMemberMetadata) []string {
	if sub == nil {
		return []string{}
	}
	names := slices.Clone(sub.Topics)
	slices.Sort(names)
	return slices.Compact(names)
}

// classicJoinToConsumer serves a JoinGroup into a consumer-protocol group
// with members: the classic member is kept with its subscription (from its
// first protocol's metadata) and reconciled like a consumer-protocol member
// (the partitions its subscription says it owns count as its owned list).
// It is answered at once with its member epoch as generation, no leader and
// no member list; its SyncGroup then returns its assignment.
func (s *Shard) classicJoinToConsumer(now time.Time, t Ticket, c Client, req *kmsg.JoinGroupRequest, out *Output, g *Group) {
	v := req.Version
	fail := func(code int16, memberID string) { out.reply(t, joinError(v, code, memberID)) }
	cg := g.cg
	if strings.ToLower(s.cfg.ConsumerMigrationPolicy) == MigrationDisabled {
		fail(ErrInconsistentProtocol, req.MemberID)
		return
	}
	instance := strOr(req.InstanceID)
	if most := s.cfg.ConsumerMaxSize; most > 0 && len(cg.members) >= most && cg.members[req.MemberID] == nil && !cg.hasStaticMember(instance) {
		// Kafka checks the size first, before the protocols and before a
		// new member is asked for its id: a joiner that is no member is
		// refused at once, not one round trip later. A static member's
		// instance id is exempt, as for ConsumerGroupHeartbeat: the join
		// can only take that member's place or be fenced.
		fail(ErrGroupMaxSizeReached, "")
		return
	}
	if req.ProtocolType != "consumer" || len(req.Protocols) == 0 {
		fail(ErrInconsistentProtocol, req.MemberID)
		return
	}
	// Every classic member must support a protocol this member lists.
	common := false
	for _, p := range req.Protocols {
		ok := true
		for _, id := range cg.ids {
			if cm := cg.members[id]; cm.classic != nil && cm.id != req.MemberID && !hasProtocol(cm.classic.protocols, p.Name) {
				ok = false
			}
		}
		common = common || ok
	}
	sub, parsed := parseSubscription(req.Protocols[0].Metadata)
	if !common || !parsed {
		fail(ErrInconsistentProtocol, req.MemberID)
		return
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond // within bounds: JoinGroup checked it
	var m, replaced *cmember
	switch {
	case instance != "":
		if owner, ok := cg.static[instance]; ok {
			if owner == req.MemberID {
				m = cg.members[owner]
			} else if req.MemberID != "" {
				fail(ErrFencedInstanceID, req.MemberID)
				return
			} else {
				replaced = cg.members[owner]
			}
		} else if req.MemberID != "" {
			fail(ErrUnknownMemberID, req.MemberID)
			return
		}
	case req.MemberID == "" && v >= 4:
		fail(ErrMemberIDRequired, s.newMemberID(c.ID))
		return
	case req.MemberID != "":
		// An id the group does not know is the one MEMBER_ID_REQUIRED gave
		// out (or a member fenced since): as Kafka does, the join creates
		// the member with that id.
		m = cg.members[req.MemberID]
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if v == 0 || rebalance <= 0 {
		rebalance = session
	}
	upd := memberUpdate{instanceID: instance, rack: strOr(sub.Rack), rebalance: rebalance, names: subscriptionNames(sub),
		classic: &classicMeta{session: session, protocols: req.Protocols}}
	var next cmember
	classicFields(&next, c, upd)
	idLen := len(req.MemberID)
	switch {
	case replaced != nil:
		idLen = generatedIDLen(instance)
	case m == nil && req.MemberID == "":
		idLen = generatedIDLen(c.ID)
	}
	if msg := s.memberRecordRefusal(now, g.id, idLen, &next); msg != "" {
		fail(ErrUnknownServer, req.MemberID) // JoinGroup has no message: logged
		return
	}
	upd.classic.protocols = cloneProtocols(req.Protocols)
	h := &hbReq{c: c, now: now, out: out, owned: tpset{}}
	for _, op := range sub.OwnedPartitions {
		for _, p := range op.Partitions {
			h.owned.add(op.Topic, p)
		}
	}
	if replaced != nil {
		// The new incarnation of a static member joins with no member id
		// (fenced above otherwise): it gets a fresh one, as a classic
		// group's replacement does.
		m = g.replaceStaticConsumer(h, replaced, s.newMemberID(instance))
	}
	isNew := m == nil
	if isNew {
		id := req.MemberID
		if id == "" {
			id = s.newMemberID(c.ID)
		}
		m = &cmember{id: id, epoch: epochJoining, assigned: tpset{}, pending: tpset{}}
	}
	if code := g.bumpAndAssign(h, g.applyMemberUpdate(h, m, isNew, upd), false); code != ErrNone {
		fail(code, req.MemberID)
		return
	}
	m = cg.members[m.id]
	g.reconcile(h, m)
	if replaced != nil && replaced.classic == nil {
		// A classic static member took the place of a consumer-protocol
		// one: if that was the last, the group turns classic (Kafka's
		// downgrade on replacement), and this JoinGroup joins the classic
		// group's rebalance, under the member id just given.
		g.maybeDowngrade(h, cg.epoch)
		if g.cg == nil {
			s.writeApplied(out, h.recs, nil)
			rejoin := *req
			rejoin.MemberID = m.id
			s.JoinGroup(now, t, c, &rejoin, out)
			return
		}
	}
	s.armSession(m, now, session)
	// A SyncGroup must follow within the rebalance timeout.
	s.arm(m.classicTimer, now.Add(m.rebalanceTimeout))
	resp := joinError(v, ErrNone, m.id)
	resp.Generation = m.epoch
	ptype, proto := "consumer", req.Protocols[0].Name
	resp.ProtocolType, resp.Protocol = &ptype, &proto
	resp.LeaderID = ""
	s.writeApplied(out, h.recs, func(_ time.Time, code int16, out *Output) {
		if code != ErrNone {
			out.reply(t, joinError(v, code, ""))
			return
		}
		out.reply(t, resp)
	})
}

// sameClassic reports whether two members' classic metadata are equal.
func sameClassic(a, b *classicMeta) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.session != b.session || len(a.protocols) != len(b.protocols) {
		return false
	}
	for i := range a.protocols {
		if a.protocols[i].Name != b.protocols[i].Name || string(a.protocols[i].Metadata) != string(b.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

func hasProtocol(ps []kmsg.JoinGroupRequestProtocol, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// classicMember finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup names in a consumer-protocol group.
func (cg *consumerGroup) classicMember(memberID, instanceID string) (*cmember, int16) {
	m, code := cg.namedMember(memberID, instanceID)
	if code == ErrNone && m.classic == nil {
		return nil, ErrUnknownMemberID
	}
	return m, code
}

// namedMember is the member a classic request names by member id and, if
// given, the instance id it must own (UNKNOWN_MEMBER_ID, or
// FENCED_INSTANCE_ID for an instance owned by another member id).
func (cg *consumerGroup) namedMember(memberID, instanceID string) (*cmember, int16) {
	if instanceID != "" {
		owner, ok := cg.static[instanceID]
		switch {
		case !ok:
			return nil, ErrUnknownMemberID
		case owner != memberID:
			return nil, ErrFencedInstanceID
		}
	}
	m := cg.members[memberID]
	if m == nil {
		return nil, ErrUnknownMemberID
	}
	return m, ErrNone
}

// classicSyncToConsumer answers a classic member's SyncGroup in a
// consumer-protocol group with its assignment (what it submits is
// ignored), or REBALANCE_IN_PROGRESS when it is behind the target and has
// nothing to revoke (it must rejoin).
func (s *Shard) classicSyncToConsumer(now time.Time, t Ticket, req *kmsg.SyncGroupRequest, out *Output, g *Group) {
	cg := g.cg
	m, code := cg.classicMember(req.MemberID, strOr(req.InstanceID))
	switch {
	case code != ErrNone:
	case req.Generation != m.epoch:
		code = ErrIllegalGeneration
	case (req.ProtocolType != nil && *req.ProtocolType != "consumer") ||
		(req.Protocol != nil && (len(m.classic.protocols) == 0 || *req.Protocol != m.classic.protocols[0].Name)):
		code = ErrInconsistentProtocol
	case cg.epoch > m.epoch && m.state != mUnrevoked:
		code = ErrRebalanceInProgress
		s.arm(m.classicTimer, now.Add(m.rebalanceTimeout)) // it must rejoin in time
	}
	if code != ErrNone {
		out.reply(t, syncError(req.Version, code))
		return
	}
	s.cancel(m.classicTimer)
	s.armSession(m, now, m.classic.session)
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = req.Version
	ptype, proto := "consumer", m.classic.protocols[0].Name
	r.ProtocolType, r.Protocol = &ptype, &proto
	r.MemberAssignment = encodeAssignment(m.assigned, m.classic.protocols[0].Metadata)
	out.reply(t, r)
}

// classicHeartbeatToConsumer answers a classic member's Heartbeat in a
// consumer-protocol group: REBALANCE_IN_PROGRESS when it must rejoin (it is
// behind the target, or must revoke, or partitions it waits for are free).
func (s *Shard) classicHeartbeatToConsumer(now time.Time, req *kmsg.HeartbeatRequest, g *Group) int16 {
	cg := g.cg
	m, code := cg.classicMember(req.MemberID, strOr(req.InstanceID))
	if code != ErrNone {
		return code
	}
	if req.Generation != m.epoch {
		return ErrIllegalGeneration
	}
	s.armSession(m, now, m.classic.session)
	if m.epoch < cg.epoch || m.state == mUnrevoked || (m.state == mUnreleased && g.awaitedFree(m)) {
		if !m.classicTimer.armed() {
			s.arm(m.classicTimer, now.Add(m.rebalanceTimeout))
		}
		return ErrRebalanceInProgress
	}
	return ErrNone
}

// awaitedFree reports whether every partition of m's target that m does
// not have yet is held by nobody now: the classic member can rejoin and take
// them all in one JoinGroup/SyncGroup (Kafka waits for the last of them too).
func (g *Group) awaitedFree(m *cmember) bool {
	for t, ps := range g.cg.target[m.id] {
		for _, p := range ps {
			if !m.assigned.has(t, p) {
				if _, held := g.cg.owner.get(t, p); held {
					return false
				}
			}
		}
	}
	return true
}

// classicLeaveToConsumer removes the members a LeaveGroup names from a
// consumer-protocol group: a classic member leaving, or any member an
// administrator removes, by instance id (with no member id) or by member
// id, whichever protocol it uses. Kafka refused a consumer-protocol member
// named by member id (UNKNOWN_MEMBER_ID) until 4.0 (KAFKA-18188), which
// broke the admin client's "remove all members".
//
// As Kafka's coordinator does for a LeaveGroup reaching a consumer group,
// every listed member is removed first, each answered on its own (appended
// to r.Members, NONE for a removal), and then, if anyone was removed, the
// group epoch is bumped once: the batch is one rebalance and one write, not
// one of each per member. It returns that write's records, applied already:
// the caller writes them and answers once they are durable (nil when nobody
// was removed).
func (s *Shard) classicLeaveToConsumer(now time.Time, ids []kmsg.LeaveGroupRequestMember, r *kmsg.LeaveGroupResponse, out *Output, g *Group) []rec {
	cg := g.cg
	h := &hbReq{now: now, out: out}
	before := cg.epoch
	// Every identity is looked up in the group as it was before the
	// request, as in Kafka, so a member named twice (or by member id and
	// by instance id) is answered NONE each time and removed once.
	type leaver struct {
		m     *cmember
		admin bool // removed by an administrator, not by itself
	}
	var leavers []leaver
	listed := map[string]bool{}
	for _, id := range ids {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = id.MemberID, id.InstanceID
		memberID, instanceID := id.MemberID, strOr(id.InstanceID)
		var m *cmember
		if memberID == "" && instanceID != "" {
			// Admin removal by instance id.
			if owner, ok := cg.static[instanceID]; ok {
				m = cg.members[owner]
			}
			if m == nil {
				rm.ErrorCode = ErrUnknownMemberID
			}
		} else {
			m, rm.ErrorCode = cg.namedMember(memberID, instanceID)
		}
		if m != nil && !listed[m.id] {
			listed[m.id] = true
			leavers = append(leavers, leaver{m, m.classic == nil || memberID == "" && instanceID != ""})
		}
		r.Members = append(r.Members, rm)
	}
	for _, l := range leavers {
		g.cNoteLeave(h, l.m, l.admin) // rebalance history
		g.dropConsumerMember(h, l.m)
	}
	if len(leavers) > 0 {
		g.bumpAfterRemoval(h, before)
	}
	return h.recs
}

// maybeDowngrade turns a consumer-protocol group whose members are all
// classic into a classic group, if the policy allows and the classic size
// limit is respected: it becomes Stable at a generation equal to the group
// epoch, with a protocol every member supports and the targets as
// assignments, and prepares a rebalance at once so that the members rejoin
// the classic way.
//
// epoch is the group epoch before the leave that emptied the group of
// consumer-protocol members: the classic members last learned that epoch as
// their generation, so the classic group takes it (as Kafka does) and their
// next Heartbeat is answered REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION.
// A classic member that last learned an older epoch (several members left
// before it heartbeated again) keeps it as downgradedFrom, which its
// Heartbeat may carry until the classic rebalance completes: Kafka fences
// it there, and its client then gives up its partitions as lost.
func (g *Group) maybeDowngrade(h *hbReq, epoch int32) {
	cg := g.cg
	s := g.s
	if cg == nil || len(cg.members) == 0 || !s.downgradeAllowed() || (s.cfg.MaxSize > 0 && len(cg.members) > s.cfg.MaxSize) {
		return
	}
	for _, id := range cg.ids {
		if cg.members[id].classic == nil {
			return
		}
	}
	// The protocol the classic group's vote chooses (selectProtocol): each
	// member votes for the first protocol of its list every member
	// supports, the most votes win, ties go to the first member's order
	// (it leads the classic group). Kafka votes so when it converts.
	first := cg.members[cg.ids[0]]
	votes := map[string]int{}
	for _, id := range cg.ids {
		for _, p := range cg.members[id].classic.protocols {
			all := true
			for _, other := range cg.ids {
				all = all && hasProtocol(cg.members[other].classic.protocols, p.Name)
			}
			if all {
				votes[p.Name]++
				break
			}
		}
	}
	proto, best := "", 0
	for _, p := range first.classic.protocols {
		if v := votes[p.Name]; v > best {
			proto, best = p.Name, v
		}
	}
	if proto == "" {
		return
	}
	type snap struct {
		m      *cmember
		target tpset
		epoch  int32 // before the tombstones below reset it
	}
	var members []snap
	for _, id := range cg.ids {
		members = append(members, snap{cg.members[id], cg.target[id].clone(), cg.members[id].epoch})
	}
	for _, sn := range members {
		g.emit(h, cTombstone(keyCCurrent, g.id, sn.m.id))
		g.emit(h, cTombstone(keyCTarget, g.id, sn.m.id))
		g.emit(h, cTombstone(keyCMember, g.id, sn.m.id))
	}
	for _, sn := range members {
		cm := sn.m
		m := &member{id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			sessionTimeout: cm.classic.session, rebalanceTimeout: cm.rebalanceTimeout,
			protocols: cloneProtocols(cm.classic.protocols)}
		var meta []byte
		for _, p := range cm.classic.protocols {
			if p.Name == proto {
				meta = p.Metadata
			}
		}
		m.assignment = encodeAssignment(sn.target, meta)
		if sn.epoch != epoch && sn.epoch > 0 {
			// Another leave bumped the epoch before this member heard of
			// it: it still knows its own epoch (heartbeat tolerates it).
			m.downgradedFrom = sn.epoch
			g.downgraded = true
		}
		g.addMember(m, "consumer")
		s.arm(m.session, h.now.Add(m.sessionTimeout))
	}
	// The group-level tombstones last: applied to a group that has no
	// classic member yet and no offsets, the consumer group's tombstone
	// deletes the group from the shard (the group of an Empty consumer
	// group going away), and the classic members above would be added to
	// a group nobody holds any more.
	g.emit(h, cTombstone(keyCTMeta, g.id, ""))
	g.emit(h, cTombstone(keyCGroup, g.id, ""))
	g.protocolType, g.protocol, g.generation, g.leader = "consumer", proto, epoch, g.members[0].id
	g.transition(Stable, h.now)
	g.updateSubscribed()
	// The tombstones above are written after the classic record (with the
	// heartbeat's records): it carries them (cgending.go).
	s.addEnding(g.id, ending{consumer: 1})
	// The record says the rebalance below is pending: it lives in memory
	// only, and a load of this record (a restart, a failover) starts it
	// again, or the classic members would stay Stable with the targets and
	// the partitions of the members that left would stay unassigned.
	img := g.image(func(m *member) []byte { return m.assignment })
	img.rebalance = true
	g.writeMetadata(h.now, h.out, img, nil)
	s.addEnding(g.id, ending{consumer: -1})
	g.rbConverted(h.now, "group converted from the consumer protocol (its last consumer-protocol member left)", nil) // rebalance history
	g.prepareRebalance(h.now, h.out)
}
