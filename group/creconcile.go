package group

import (
	"maps"
	"slices"
	"time"
)

// reconcile moves m towards its target, as Kafka's current-assignment
// builder does, and writes its current assignment if it changed:
//
//   - a STABLE member behind the assignment epoch computes its next
//     assignment; at the same epoch, a changed subscription only drops the
//     partitions of topics it left (they go pending revocation);
//   - an UNREVOKED member stays until a heartbeat no longer lists any of its
//     pending partitions (a heartbeat that lists nothing, null, never
//     completes a revocation), then computes its next assignment;
//   - an UNRELEASED member computes its next assignment at every heartbeat,
//     picking up partitions their previous holders have released.
func (g *Group) reconcile(h *hbReq, m *cmember) {
	cg := g.cg
	if cg.memberUnresolved(m, g.s.cfg.Topics) {
		// Its regex's topics are not known yet (holdsUnresolved): it
		// keeps what it holds until they are.
		return
	}
	var next *ccurrent
	switch m.state {
	case mStable:
		switch {
		case m.epoch != cg.assignEpoch:
			next = g.computeNext(m, m.epoch, h.owned)
		case h.subscriptionChanged:
			next = g.dropUnsubscribed(m, h.owned)
		}
	case mUnrevoked:
		if h.owned == nil || overlaps(h.owned, m.pending) {
			if h.subscriptionChanged {
				next = g.dropUnsubscribed(m, h.owned)
			}
		} else {
			// Revoked: the member moves on from its own epoch. A further
			// revocation (the target moved on meanwhile) is asked at that
			// same epoch, never a bumped one, as Kafka does since 4.2: a
			// bump would let two members own one partition at one epoch
			// (one after the other). Reaching the target takes its epoch.
			next = g.computeNext(m, m.epoch, h.owned)
		}
	default:
		next = g.computeNext(m, m.epoch, h.owned)
	}
	if next == nil || (next.epoch == m.epoch && next.prevEpoch == m.prevEpoch && next.state == m.state &&
		next.assigned.equal(m.assigned) && next.pending.equal(m.pending)) {
		return
	}
	if next.epoch != m.epoch || next.state != m.state || !next.assigned.equal(m.assigned) || !next.pending.equal(m.pending) {
		m.changedAt = h.now // progress, not only the previous epoch noted (Shard.heartbeatInterval)
	}
	if !next.assigned.equal(m.assigned) {
		h.assignedChanged = true
	}
	g.emit(h, cCurrentRec(g.id, m.id, next))
	switch {
	case m.classic != nil:
		// A classic member has its join and sync timers only
		// (classicTimer): it learns that it must revoke from a heartbeat
		// answered REBALANCE_IN_PROGRESS, and its rebalance timeout runs
		// from then, as in Kafka, not from this reconciliation.
	case next.state == mUnrevoked:
		m.rebalanceEpoch = next.epoch
		g.s.arm(m.rebalance, h.now.Add(m.rebalanceTimeout))
	default:
		g.s.cancel(m.rebalance)
	}
}

// overlaps reports whether a and b share a partition.
func overlaps(a, b tpset) bool {
	for t, ps := range a {
		for _, p := range ps {
			if b.has(t, p) {
				return true
			}
		}
	}
	return false
}

// computeNext is the member's next current assignment given the group's
// target: it keeps what stays, revokes what moves away (and waits for the
// revocation before advancing its epoch), and takes what its target adds
// as far as no other member still holds it. A member left with partitions
// to revoke is at epoch (its own, or the next one after a revocation).
func (g *Group) computeNext(m *cmember, epoch int32, owned tpset) *ccurrent {
	cg := g.cg
	subscribed := map[string]bool{}
	for _, t := range cg.memberTopics(m, g.s.cfg.Topics) {
		subscribed[t] = true
	}
	target := cg.target[m.id]
	// Built a topic at a time from sorted slices: a member of a new group
	// holds every partition at first, and per-partition set and map
	// operations made this the costliest step of a heartbeat.
	keep, revoke, add := tpset{}, tpset{}, tpset{}
	withheld := false
	for t, ps := range m.assigned {
		sub, tg := subscribed[t], target[t]
		var k, r []int32
		for _, p := range ps {
			if _, in := slices.BinarySearch(tg, p); sub && in {
				k = append(k, p)
			} else {
				r = append(r, p)
			}
		}
		if k != nil {
			keep[t] = k
		}
		if r != nil {
			revoke[t] = r
		}
	}
	for t, ps := range target {
		if !subscribed[t] {
			continue
		}
		have := m.assigned[t]
		var a []int32
		for _, p := range ps {
			if _, in := slices.BinarySearch(have, p); in {
				continue
			}
			if holder, held := cg.owner.get(t, p); held && holder != m.id {
				withheld = true
				continue
			}
			a = append(a, p)
		}
		if a != nil {
			add[t] = a
		}
	}
	// The epochs partitions were assigned at: the member's, less what it no
	// longer has, plus the new ones at the assignment epoch.
	var at map[topicPartition]int32
	if len(m.assignedAt) == 0 {
		at = make(map[topicPartition]int32, add.size()) // a newcomer: sized once
	} else {
		at = maps.Clone(m.assignedAt)
	}
	forget := func(s tpset) {
		for t, ps := range s {
			for _, p := range ps {
				delete(at, topicPartition{t, p})
			}
		}
	}
	forget(m.pending)
	if revoke.size() > 0 && (owned == nil || overlaps(owned, revoke)) {
		return &ccurrent{epoch: epoch, prevEpoch: m.epoch, state: mUnrevoked, assigned: keep, pending: revoke, assignedAt: at}
	}
	forget(revoke)
	for t, ps := range add {
		keep.addAll(t, ps)
		for _, p := range ps {
			at[topicPartition{t, p}] = cg.assignEpoch
		}
	}
	state := mStable
	if withheld {
		state = mUnreleased
	}
	return &ccurrent{epoch: cg.assignEpoch, prevEpoch: m.epoch, state: state, assigned: keep, pending: tpset{}, assignedAt: at}
}

// dropUnsubscribed moves the partitions of topics m no longer subscribes to
// from assigned to pending revocation, at the same epoch.
func (g *Group) dropUnsubscribed(m *cmember, owned tpset) *ccurrent {
	subscribed := map[string]bool{}
	for _, t := range g.cg.memberTopics(m, g.s.cfg.Topics) {
		subscribed[t] = true
	}
	keep, pending := tpset{}, m.pending.clone()
	for t, ps := range m.assigned {
		for _, p := range ps {
			if subscribed[t] {
				keep.add(t, p)
			} else {
				pending.add(t, p)
			}
		}
	}
	at := maps.Clone(m.assignedAt)
	if pending.size() > 0 && (owned == nil || overlaps(owned, pending)) {
		return &ccurrent{epoch: m.epoch, prevEpoch: m.epoch, state: mUnrevoked, assigned: keep, pending: pending, assignedAt: at}
	}
	for tp := range at {
		if !keep.has(tp.topic, tp.partition) {
			delete(at, tp)
		}
	}
	return &ccurrent{epoch: m.epoch, prevEpoch: m.prevEpoch, state: m.state, assigned: keep, pending: tpset{}, assignedAt: at}
}

// consumerLeave handles MemberEpoch -1 (leave) and -2 (a static member
// leaving for a restart: it keeps its partitions, reserved for its
// instance, until its session expires or its instance rejoins).
func (s *Shard) consumerLeave(h *hbReq) (*Group, *cmember, int16, string) {
	r := h.req
	g := s.groups[r.Group]
	if g == nil || g.cg == nil {
		return nil, nil, ErrGroupIDNotFound, "Group " + r.Group + " not found."
	}
	cg := g.cg
	m := cg.members[r.MemberID]
	if r.InstanceID != nil {
		owner, ok := cg.static[*r.InstanceID]
		switch {
		case !ok:
			return nil, nil, ErrUnknownMemberID, "Instance id " + *r.InstanceID + " is unknown."
		case owner != r.MemberID:
			return nil, nil, ErrFencedInstanceID, "Instance id " + *r.InstanceID + " belongs to another member."
		}
		m = cg.members[owner]
	}
	if m == nil {
		return nil, nil, ErrUnknownMemberID, "Member " + r.MemberID + " is not a member of group " + r.Group + "."
	}
	if r.MemberEpoch == epochStatic && m.instanceID != "" {
		at := make(map[topicPartition]int32, m.assigned.size())
		for t, ps := range m.assigned {
			for _, p := range ps {
				at[topicPartition{t, p}] = 0
			}
		}
		g.emit(h, cCurrentRec(g.id, m.id, &ccurrent{epoch: epochStatic, prevEpoch: m.epoch, state: mStable,
			assigned: m.assigned.clone(), pending: tpset{}, assignedAt: at}))
		m.awayAt = h.now
		s.cancel(m.rebalance)
		return g, m, ErrNone, ""
	}
	g.cNoteLeave(h, m, false) // rebalance history
	g.fenceConsumerMember(h, m)
	return g, m, ErrNone, ""
}

// fenceConsumerMember removes m (leave, session or rebalance timeout) and
// bumps the group epoch so that the others take over its partitions.
func (g *Group) fenceConsumerMember(h *hbReq, m *cmember) {
	before := g.cg.epoch
	g.dropConsumerMember(h, m)
	g.bumpAfterRemoval(h, before)
}

// dropConsumerMember removes m from the group (its tombstones) without
// bumping the group epoch: the caller bumps it once after its removals
// (bumpAfterRemoval), as a LeaveGroup naming several members does.
func (g *Group) dropConsumerMember(h *hbReq, m *cmember) {
	g.emit(h, cTombstone(keyCCurrent, g.id, m.id))
	g.emit(h, cTombstone(keyCTarget, g.id, m.id))
	g.emit(h, cTombstone(keyCMember, g.id, m.id))
}

// bumpAfterRemoval bumps the group epoch once after one or more members
// were removed (dropConsumerMember), so that the others take over their
// partitions; before is the epoch before the removals. When the group
// becomes empty its target epoch follows the group epoch, so it reads Empty
// rather than Assigning; when only classic members remain it may turn
// classic (maybeDowngrade).
func (g *Group) bumpAfterRemoval(h *hbReq, before int32) {
	cg := g.cg
	// The bump carries the metadata hash of what the remaining members
	// subscribe to, as Kafka's removal records the remaining members'
	// topic metadata (its hash since 4.1): a topic only the removed members
	// subscribed to leaves the hash with this bump. Keeping the old hash
	// made the next heartbeat find it changed and bump the epoch again.
	g.cNoteTopics(h, g.refreshMetadataHash()) // rebalance history
	g.emit(h, cGroupRec(g.id, cg.epoch+1, cg.hash))
	if len(cg.members) == 0 {
		g.emit(h, cTMetaRec(g.id, cg.epoch))
		cg.assignedAt = time.Time{} // the next member's target comes at once
		g.s.cancel(cg.assignTimer)
	}
	g.maybeDowngrade(h, before)
}

// onClassicTimer fences a classic member of a consumer-protocol group that
// did not send the SyncGroup or JoinGroup it owed in time.
func (g *Group) onClassicTimer(now time.Time, m *cmember, out *Output) {
	g.fenceOnTimer(now, m, out, "rejoin timeout")
}

// fenceOnTimer fences m when one of its timers fires, if it is still a
// member.
func (g *Group) fenceOnTimer(now time.Time, m *cmember, out *Output, what string) {
	if g.cg == nil || g.cg.members[m.id] != m {
		return
	}
	h := &hbReq{now: now, out: out}
	g.cNoteTimer(h, m, what) // rebalance history
	g.fenceConsumerMember(h, m)
	g.s.writeApplied(out, h.recs, g.logFailure(what+" of "+m.id))
}

// sessionTimeout is how long m lives without a heartbeat: its own classic
// session timeout, or the coordinator's consumer session timeout.
func (g *Group) sessionTimeout(m *cmember) time.Duration {
	if m.classic != nil {
		return m.classic.session
	}
	return g.s.sessionFor(g.id)
}

// replaceStaticConsumer hands a static member that left with epoch -2 over
// to the member joining with its instance id: the new member id inherits
// its subscription, target and partitions, at epoch 0.
func (g *Group) replaceStaticConsumer(h *hbReq, old *cmember, newID string) *cmember {
	cg := g.cg
	g.cNoteStatic(h, old, newID) // rebalance history
	next := *old
	next.id = newID
	target := cg.target[old.id].clone()
	cur := &ccurrent{epoch: epochJoining, prevEpoch: epochJoining, state: old.state, assigned: old.assigned.clone(),
		pending: old.pending.clone(), assignedAt: maps.Clone(old.assignedAt)}
	g.emit(h, cTombstone(keyCCurrent, g.id, old.id))
	g.emit(h, cTombstone(keyCTarget, g.id, old.id))
	g.emit(h, cTombstone(keyCMember, g.id, old.id))
	g.emit(h, cMemberRec(g.id, &next))
	if target != nil {
		g.emit(h, cTargetRec(g.id, next.id, target))
	}
	g.emit(h, cCurrentRec(g.id, next.id, cur))
	return cg.members[next.id]
}

// onConsumerSessionExpired fences a member that stopped heartbeating.
func (g *Group) onConsumerSessionExpired(now time.Time, m *cmember, out *Output) {
	g.fenceOnTimer(now, m, out, "session expiry")
}

// onConsumerRebalanceExpired fences a member that did not revoke in time,
// unless it advanced since the timer was armed.
func (g *Group) onConsumerRebalanceExpired(now time.Time, m *cmember, out *Output) {
	if m.epoch != m.rebalanceEpoch || m.state != mUnrevoked {
		return
	}
	g.fenceOnTimer(now, m, out, "rebalance timeout")
}

func (g *Group) logFailure(what string) func(time.Time, int16, *Output) {
	return func(_ time.Time, code int16, _ *Output) {
		g.s.logWriteFailure(code, "group %q: writing the %s failed", g.id, what)
	}
}
