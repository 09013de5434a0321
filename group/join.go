package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup handles a JoinGroup request (docs/group-semantics.md §join). The
// reply may come now (errors, MEMBER_ID_REQUIRED, an unchanged follower) or
// when the join phase completes.
func (s *Shard) JoinGroup(now time.Time, t Ticket, c Client, req *kmsg.JoinGroupRequest, out *Output) {
	v := req.Version
	fail := func(code int16, memberID string) { out.reply(t, joinError(v, code, memberID)) }
	if req.Group == "" {
		fail(ErrInvalidGroupID, req.MemberID)
		return
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < s.cfg.MinSessionTimeout || session > s.cfg.MaxSessionTimeout {
		fail(ErrInvalidSessionTimeout, req.MemberID)
		return
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if v == 0 || rebalance <= 0 {
		// v0 has no rebalance timeout; a zero or negative one would end
		// every rebalance at once (KAFKA-8653): use the session timeout.
		rebalance = session
	}
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}
	g := s.groups[req.Group]
	if g != nil && g.cg != nil && g.state != Dead {
		// (A consumer group being deleted stays one: its deletion's
		// tombstones remove it once durable; meanwhile the join is told
		// to retry, below.)
		if len(g.cg.members) > 0 {
			// A classic member of a consumer-protocol group (mixed).
			s.classicJoinToConsumer(now, t, c, req, out, g)
			return
		}
		// An empty consumer group becomes a classic group; its offsets
		// stay. The tombstones are applied now, as the consumer group's
		// own records are: replayed only once durable, they removed a
		// consumer group that a member had created again meanwhile, and
		// a failed write left the shard classic and the store not. A
		// group without offsets goes with them (as in Kafka, which
		// removes the consumer group and then creates a classic one).
		recs := []rec{cTombstone(keyCTMeta, g.id, ""), cTombstone(keyCGroup, g.id, "")}
		for i := range recs {
			s.replay(&recs[i], false)
		}
		s.writeApplied(out, recs, nil)
		g = s.groups[req.Group]
		if g == nil {
			// Nothing of the consumer group is left: its history goes
			// with it, as a deleted or expired group's does; a classic
			// group made below for this join is a new group (generation
			// 0, as in Kafka). Without this, a refused join (a member
			// id) left the history of a group that no longer exists,
			// and a new classic group, never stored until its first
			// generation, left it at the next load. The tombstones
			// replay once durable, after any event still being written.
			if hist := s.historyTombstones(req.Group, nil); len(hist) > 0 {
				id := req.Group
				s.write(out, hist, func(now time.Time, code int16, _ *Output) {
					if code != ErrNone {
						s.logWriteFailure(code, "group %q: deleting the history of the removed consumer group failed", id)
						return
					}
					s.evalStorm(id, now) // a new group of the id keeps none of the old events
				})
			}
		}
	}
	if g == nil {
		if req.MemberID != "" {
			fail(ErrUnknownMemberID, req.MemberID)
			return
		}
		g = s.newGroup(req.Group, now)
	}
	if !g.acceptJoiningMember(req.MemberID, instanceID) {
		// KIP-389: over group.max.size. A known member is evicted so that
		// a group above a lowered limit shrinks (KAFKA-9885).
		if m := g.memberByID(req.MemberID); m != nil {
			c := causeOf(CauseOther, now, m)
			c.Detail = "evicted: group.max.size"
			g.note(c)
			g.removeMember(now, m, out)
		} else if pt, ok := g.pending[req.MemberID]; ok {
			s.cancel(pt)
			mapDrop(&g.pending, req.MemberID)
			g.tryCompleteJoin(now, out)
		}
		fail(ErrGroupMaxSizeReached, "")
		return
	}
	if g.state == Dead {
		fail(ErrCoordinatorNotAvailable, req.MemberID)
		return
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		fail(ErrInconsistentProtocol, req.MemberID)
		return
	}
	j := joinReq{t: t, v: v, c: c, req: req, session: session, rebalance: rebalance, instanceID: instanceID}
	if req.MemberID == "" {
		g.joinNew(now, &j, out)
	} else {
		g.joinExisting(now, &j, out)
	}
}

type joinReq struct {
	t          Ticket
	v          int16
	c          Client
	req        *kmsg.JoinGroupRequest
	session    time.Duration
	rebalance  time.Duration
	instanceID string
}

func (g *Group) acceptJoiningMember(memberID, instanceID string) bool {
	max := g.s.cfg.MaxSize
	if max <= 0 {
		return true
	}
	if cur, ok := g.static[instanceID]; ok && memberID == "" && instanceID != "" {
		// A static member restarting takes its instance's place (the
		// old incarnation is fenced): the group does not grow, so it is
		// admitted as that member would be. Kafka's classic coordinator
		// counts it as a newcomer and refuses it at the limit with an
		// error Java consumers treat as fatal; its consumer groups exempt
		// the instance (KAFKA-20601), as cohort's do.
		memberID = cur
	}
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		if m := g.memberByID(memberID); m != nil && m.join != nil {
			return true
		}
		return g.awaiting < max
	default:
		return g.memberByID(memberID) != nil || len(g.members) < max
	}
}

func (g *Group) joinNew(now time.Time, j *joinReq, out *Output) {
	prefix := j.c.ID
	if j.instanceID != "" {
		prefix = j.instanceID
	}
	newID := g.s.newMemberID(prefix)
	if j.instanceID != "" {
		if oldID, ok := g.static[j.instanceID]; ok {
			g.replaceStatic(now, j, oldID, newID, out)
			return
		}
		g.addMemberAndRebalance(now, j, newID, out)
		return
	}
	if j.v >= 4 {
		// KIP-394: hand out the id and wait for the member to come back
		// with it; it does not count as a member until then.
		pt := newTimer(nil)
		pt.fire = func(now time.Time, out *Output) {
			if g.pending[newID] == pt {
				mapDrop(&g.pending, newID)
				g.tryCompleteJoin(now, out)
			}
		}
		mapPut(&g.pending, newID, pt)
		g.s.arm(pt, now.Add(j.session))
		out.reply(j.t, joinError(j.v, ErrMemberIDRequired, newID))
		return
	}
	g.addMemberAndRebalance(now, j, newID, out)
}

func (g *Group) joinExisting(now time.Time, j *joinReq, out *Output) {
	id := j.req.MemberID
	if pt, ok := g.pending[id]; ok {
		if j.instanceID != "" {
			// Kafka treats this as an invariant violation: pending ids are
			// only given to dynamic members. The pending id stays, so a
			// client can repeat the request: at most a line a minute.
			g.s.pendingStaticLog.logf(g.s, now, "group %q: pending member %q joined with instance id %q; request refused", g.id, id, j.instanceID)
			out.reply(j.t, joinError(j.v, ErrUnknownServer, id))
			return
		}
		g.s.cancel(pt)
		mapDrop(&g.pending, id)
		g.addMemberAndRebalance(now, j, id, out)
		return
	}
	m, code := g.validateMember(id, j.instanceID)
	if code != ErrNone {
		out.reply(j.t, joinError(j.v, code, id))
		return
	}
	switch g.state {
	case PreparingRebalance:
		g.updateMemberAndRebalance(now, m, j, out)
	case CompletingRebalance:
		if m.matches(j.req.Protocols) {
			// Lost response: answer again with the current generation.
			resp := g.joinResponse(j.v, m.id)
			if m.id == g.leader {
				resp.Members = g.memberList()
			}
			out.reply(j.t, resp)
			return
		}
		g.updateMemberAndRebalance(now, m, j, out)
	case Stable:
		if m.id == g.leader || !m.matches(j.req.Protocols) {
			// The leader's rejoin always rebalances: it may have seen
			// new topic metadata.
			g.updateMemberAndRebalance(now, m, j, out)
			return
		}
		out.reply(j.t, g.joinResponse(j.v, m.id))
	default: // Empty: members cannot exist
		out.reply(j.t, joinError(j.v, ErrUnknownMemberID, id))
	}
}

// validateMember is Kafka's member validation: a static instance must map to
// the given member id; the member must exist.
func (g *Group) validateMember(memberID, instanceID string) (*member, int16) {
	if instanceID != "" {
		cur, ok := g.static[instanceID]
		if !ok {
			return nil, ErrUnknownMemberID
		}
		if cur != memberID {
			return nil, ErrFencedInstanceID
		}
	}
	m := g.memberByID(memberID)
	if m == nil {
		return nil, ErrUnknownMemberID
	}
	return m, ErrNone
}

func (g *Group) addMemberAndRebalance(now time.Time, j *joinReq, id string, out *Output) {
	m := &member{
		id:               id,
		instanceID:       j.instanceID,
		clientID:         j.c.ID,
		clientHost:       j.c.Host,
		sessionTimeout:   j.session,
		rebalanceTimeout: j.rebalance,
		protocols:        cloneProtocols(j.req.Protocols),
		isNew:            true,
	}
	c := causeOf(CauseMemberJoined, now, m)
	c.Reason = reasonOf(j.req.Reason)
	g.note(c) // before adding: the member is new to the event
	g.addMember(m, j.req.ProtocolType)
	g.park(m, j.t, j.v, out)
	g.rbJoined(now, m)
	g.s.arm(m.session, now.Add(g.s.cfg.NewMemberJoinTimeout))
	if g.state == PreparingRebalance && g.initialDelay {
		g.newMemberAdded = true
	}
	if g.canRebalance() {
		g.prepareRebalance(now, out)
	} else {
		g.tryCompleteJoin(now, out)
	}
}

func (g *Group) updateMemberAndRebalance(now time.Time, m *member, j *joinReq, out *Output) {
	g.updateMemberAndRebalanceFor(now, m, j, nil, out)
}

// updateMemberAndRebalanceFor is updateMemberAndRebalance with the cause to
// record (nil: the member's rejoin, a cause unless the group is already
// preparing a rebalance and its metadata did not change).
func (g *Group) updateMemberAndRebalanceFor(now time.Time, m *member, j *joinReq, cause *Cause, out *Output) {
	changed := !m.matches(j.req.Protocols)
	g.setProtocols(m, cloneProtocols(j.req.Protocols))
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.clientID, m.clientHost = j.c.ID, j.c.Host
	switch {
	case cause != nil:
		g.note(*cause)
	case g.state != PreparingRebalance || changed:
		c := causeOf(CauseMetadataChanged, now, m)
		c.Reason = reasonOf(j.req.Reason)
		if !changed {
			c.Detail = "the leader rejoined"
		}
		g.note(c)
	}
	g.park(m, j.t, j.v, out)
	g.rbJoined(now, m)
	if g.canRebalance() {
		g.prepareRebalance(now, out)
	} else {
		g.tryCompleteJoin(now, out)
	}
}

// replaceStatic handles a known static instance joining with an empty member
// id (KIP-345): the member gets a new id, the old id is fenced.
func (g *Group) replaceStatic(now time.Time, j *joinReq, oldID, newID string, out *Output) {
	m := g.memberByID(oldID)
	if m == nil { // inconsistent books; treat as a new static member
		mapDrop(&g.static, j.instanceID)
		g.addMemberAndRebalance(now, j, newID, out)
		return
	}
	// Fence the old incarnation's parked requests at once.
	if m.join != nil {
		out.reply(m.join.t, joinError(m.join.v, ErrFencedInstanceID, oldID))
		m.join = nil
		g.awaiting--
	}
	if m.sync != nil {
		out.reply(m.sync.t, syncError(m.sync.v, ErrFencedInstanceID))
		m.sync = nil
	}
	if p := m.replacing; p != nil { // an earlier replacement, its write in flight
		out.reply(p.t, joinError(p.v, ErrFencedInstanceID, oldID))
		m.replacing = nil
	}
	old := struct {
		protocols          []kmsg.JoinGroupRequestProtocol
		session, rebalance time.Duration
		clientID, host     string
		wasLeader          bool
		oldLeader          string
	}{m.protocols, m.sessionTimeout, m.rebalanceTimeout, m.clientID, m.clientHost, g.leader == oldID, g.leader}
	oldProtocol := g.protocol

	g.renameMember(m, newID)
	// The replacement is not a new member, even if the one it replaces
	// had not completed a join yet: parked in JoinGroup, it counts as
	// alive until the join phase closes (Kafka's replacement member is a
	// fresh, not-new one).
	m.isNew = false
	g.setProtocols(m, cloneProtocols(j.req.Protocols))
	m.sessionTimeout, m.rebalanceTimeout = j.session, j.rebalance
	m.clientID, m.clientHost = j.c.ID, j.c.Host
	g.s.arm(m.session, now.Add(m.sessionTimeout))

	sc := causeOf(CauseStaticReplaced, now, m)
	sc.Reason, sc.Detail = reasonOf(j.req.Reason), "replaced member "+oldID
	switch g.state {
	case Stable:
		if g.selectProtocol() != oldProtocol {
			g.updateMemberAndRebalanceFor(now, m, j, &sc, out)
			return
		}
		// Same protocol: no rebalance, but the new id must be durable
		// before the member uses it (KAFKA-10284).
		t, v := j.t, j.v
		gen := g.generation
		pending := &parked{t: t, v: v}
		m.replacing = pending
		g.persistMetadata(now, out, func(now time.Time, code int16, out *Output) {
			if m.replacing != pending {
				return // fenced by a later replacement meanwhile: answered
			}
			m.replacing = nil
			if code == ErrNone && g.memberByID(newID) != m {
				out.reply(t, joinError(v, ErrUnknownMemberID, "")) // removed meanwhile
				return
			}
			if code != ErrNone {
				if g.memberByID(newID) == m && g.generation == gen {
					g.renameMember(m, oldID)
					g.setProtocols(m, old.protocols)
					m.sessionTimeout, m.rebalanceTimeout = old.session, old.rebalance
					m.clientID, m.clientHost = old.clientID, old.host
				}
				out.reply(t, joinError(v, code, ""))
				return
			}
			resp := g.joinResponse(v, newID)
			switch {
			case v >= 9 && newID == g.leader:
				// KIP-814: the returning leader gets the members but
				// must not compute a new assignment.
				resp.Members = g.memberList()
				resp.SkipAssignment = true
			case v < 9 && old.wasLeader:
				// Older clients would reassign if told they lead:
				// show them the old leader id so they act as followers.
				resp.LeaderID = old.oldLeader
			}
			out.reply(t, resp)
		})
	case CompletingRebalance:
		// The leader may hold the old id: start over.
		g.updateMemberAndRebalanceFor(now, m, j, &sc, out)
	default: // PreparingRebalance
		g.updateMemberAndRebalanceFor(now, m, j, &sc, out)
	}
}

func (g *Group) renameMember(m *member, id string) {
	oldID := m.id
	g.unindexMember(oldID)
	m.id = id
	if g.byID != nil {
		g.byID[id] = m
	}
	if m.instanceID != "" {
		mapPut(&g.static, m.instanceID, id)
	}
	if g.leader == oldID {
		g.leader = id
	}
	if _, ok := g.pendingSync[oldID]; ok {
		mapDrop(&g.pendingSync, oldID)
		mapPut(&g.pendingSync, id, struct{}{})
	}
}
