package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The rebalance history of consumer-protocol (KIP-848) groups
// (docs/history.md): one RebalanceEvent per group-epoch bump. The handlers
// note the triggers of a request on its hbReq (cNote and the helpers below,
// called where a member joins, changes its subscription, leaves, times out,
// is replaced or removed, and where the subscribed topics change); emit
// passes every record it replays to cObserve, which starts the event at the
// bump with those causes, notes when the target is computed, follows each
// member to the target epoch, and completes the event (stable, empty, or
// superseded by the next bump). The completed event is emitted as a history
// record with the request's own records, so it is applied at once, written
// in the same write, and dropped with them if that write fails.

// cHistory is a consumer group's history state (consumerGroup.hist); memory
// only: an event in progress when the partition moves is not recorded (the
// loaded group starts one with cause loaded if it is not Stable).
type cHistory struct {
	rb *cTracker
	// topics is the subscribed topics' metadata when the metadata hash was
	// last computed (nil: not known since the load).
	topics map[string]topicSnap
	// topicsAt and accessAt are the catalog's and the ACLs' versions at the
	// group's last heartbeat: a change of the subscribed topics that comes
	// with the ACLs alone moving is told as such (cNoteTopics).
	topicsAt, accessAt uint64
}

type topicSnap struct {
	partitions int32 // -1: subscribed by name but does not exist
}

// cTracker follows the event of one group epoch.
type cTracker struct {
	start     time.Time
	fromEpoch int32
	epoch     int32
	cause     Cause
	more      []Cause
	cut       map[CauseKind]int // causes past more's bound (RebalanceEvent.CutCauses)
	targetAt  time.Time         // when the target at epoch was computed; zero until then
	// earlier is how long earlier targets of the event were in force
	// before a bump it took in replaced them (RebalanceEvent.EarlierTargetMs).
	earlier time.Duration
	// before is each member's partitions (assigned, pending) at the bump.
	before     map[string][2]tpset
	beforeInst map[string]string // instance id -> member id at the bump
	// pending are the members not reconciled to epoch yet.
	pending map[string]*cWaiting
	waits   []Wait
	evicted []string
	// fenced indexes, in waits, the entry of each member fenced during the
	// event: a member listed once, by that entry (addWait).
	fenced map[string]int
	// counted: the node keeps no history, the event is built only to be
	// counted (OnRebalance): no waits are listed.
	counted bool
}

// addWait lists w in the event, each member at most once: a member fenced
// during the event (w.Evicted) and back with the same member id (a
// consumer-protocol client keeps its id when it rejoins) keeps the entry of
// its fencing, the wait that held the rebalance up; its wait after the
// rejoin is not listed. Fenced twice, it keeps the longer of the two.
func (rb *cTracker) addWait(w Wait) {
	if rb.counted {
		return
	}
	i, ok := rb.fenced[w.MemberID]
	switch {
	case ok && w.Evicted:
		if w.WaitedMs > rb.waits[i].WaitedMs {
			rb.waits[i] = w
		}
	case ok:
	case w.Evicted:
		if rb.fenced == nil {
			rb.fenced = map[string]int{}
		}
		rb.fenced[w.MemberID] = len(rb.waits)
		rb.waits = append(rb.waits, w)
		rb.evicted = append(rb.evicted, w.MemberID)
	default:
		rb.waits = append(rb.waits, w)
	}
}

// cWaiting is a member the event waits for.
type cWaiting struct {
	since   time.Time // when it started waiting for it (the target, or revocation)
	phase   string    // "assign" or "revoke": what it is doing now
	revoked bool      // it had partitions to revoke during the event
}

// phaseOf is the phase a wait is recorded under: "revoke" if the member
// had to give partitions up, else "assign".
func (w *cWaiting) phaseOf() string {
	if w.revoked {
		return "revoke"
	}
	return "assign"
}

// losesPartitions reports whether m owns a partition that target does not
// give it.
func losesPartitions(m *cmember, target tpset) bool {
	for t, ps := range m.assigned {
		for _, p := range ps {
			if !target.has(t, p) {
				return true
			}
		}
	}
	return false
}

// reconciledAt reports whether m is at epoch with exactly its target.
func reconciledAt(m *cmember, epoch int32) bool {
	return m.epoch == epoch && m.state == mStable && len(m.pending) == 0
}

// cCause builds a Cause about consumer member m (nil: none).
func cCause(kind CauseKind, now time.Time, m *cmember) Cause {
	c := Cause{Kind: kind, At: now}
	if m != nil {
		c.MemberID, c.InstanceID, c.ClientID, c.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
	}
	return c
}

// cNote notes a trigger of the request h: the next bump in h names it.
func (g *Group) cNote(h *hbReq, c Cause) {
	if !g.s.tracks() {
		return
	}
	g.linkRejoin(&c)
	if len(h.causes) >= 64 {
		return
	}
	h.causes = append(h.causes, c)
}

// cNoteMember notes what storeMember changed about a member: a join, a
// changed subscription (names or regex) or server assignor. Only a change
// that bumps the epoch is a rebalance; the note is dropped otherwise.
func (g *Group) cNoteMember(h *hbReq, m, next *cmember, isNew, subChanged, assignorChanged bool) {
	switch {
	case isNew:
		c := cCause(CauseMemberJoined, h.now, next)
		if next.classic != nil {
			c.Detail = "classic protocol member"
		}
		g.cNote(h, c)
	case subChanged:
		c := cCause(CauseSubscriptionChanged, h.now, next)
		var parts []string
		if !slices.Equal(m.names, next.names) {
			parts = append(parts, fmt.Sprintf("topics [%s] -> [%s]", strings.Join(m.names, " "), strings.Join(next.names, " ")))
		}
		if m.regex != next.regex {
			parts = append(parts, fmt.Sprintf("regex %q -> %q", m.regex, next.regex))
		}
		c.Detail = strings.Join(parts, "; ")
		g.cNote(h, c)
	case assignorChanged:
		c := cCause(CauseSubscriptionChanged, h.now, next)
		c.Detail = fmt.Sprintf("server assignor %q -> %q", m.assignor, next.assignor)
		g.cNote(h, c)
	}
}

// ClassicRejoinTimeoutDetail is the detail of a rebalance_timeout cause of a
// consumer-protocol group whose classic-protocol member was fenced for not
// sending the JoinGroup or SyncGroup it owed (not for keeping partitions it
// had to revoke): readers of the history tell the two apart by it.
const ClassicRejoinTimeoutDetail = "classic protocol member did not send the JoinGroup or SyncGroup it owed within its rebalance timeout"

// cNoteTimer notes why a timer fences m (fenceOnTimer's what).
func (g *Group) cNoteTimer(h *hbReq, m *cmember, what string) {
	var c Cause
	switch what {
	case "session expiry":
		c = cCause(CauseSessionTimeout, h.now, m)
		last := h.now.Add(-g.sessionTimeout(m))
		c.LastHeartbeat = &last
	case "rebalance timeout":
		c = cCause(CauseRebalanceTimeout, h.now, m)
		c.Detail = fmt.Sprintf("did not revoke %s within its rebalance timeout (%v)", tpsetString(m.pending), m.rebalanceTimeout)
	default:
		c = cCause(CauseRebalanceTimeout, h.now, m)
		c.Detail = ClassicRejoinTimeoutDetail
	}
	g.cNote(h, c)
}

// cNoteLeave notes a leave: a ConsumerGroupHeartbeat with epoch -1 (or -2
// from a dynamic member), a classic LeaveGroup, or (admin) a LeaveGroup
// naming only the instance id.
func (g *Group) cNoteLeave(h *hbReq, m *cmember, admin bool) {
	c := cCause(CauseMemberLeft, h.now, m)
	switch {
	case admin:
		c.Kind, c.Detail = CauseAdmin, "remove_members"
	case h.req != nil:
		c.Detail = fmt.Sprintf("leave heartbeat (member epoch %d)", h.req.MemberEpoch)
	default:
		c.Detail = "classic LeaveGroup"
	}
	g.cNote(h, c)
}

// cNoteStatic notes that the member joining as newID takes over the static
// member old: the event in progress waits for the new id instead, and the
// replacement is one more of its causes (a replacement bumps the epoch only
// if the subscription changes: then it is the new event's cause).
func (g *Group) cNoteStatic(h *hbReq, old *cmember, newID string) {
	if !g.s.tracks() {
		return
	}
	c := cCause(CauseStaticReplaced, h.now, old)
	c.MemberID, c.ClientID, c.ClientHost = newID, h.c.ID, h.c.Host
	c.Detail = "replaced member " + old.id
	if old.id == newID {
		c.Detail = "rejoined after a static leave"
	}
	g.cNote(h, c)
	if rb := g.cg.hist.rb; rb != nil {
		if w, ok := rb.pending[old.id]; ok {
			delete(rb.pending, old.id)
			rb.pending[newID] = w
		}
		rb.more = addMore(rb.more, &rb.cut, maxMoreCauses, c)
	}
}

// cNoteTopics is called where the metadata hash is refreshed (changed: it
// differs, the epoch is bumped): it notes a topics_changed cause with the
// topics created, grown or deleted, unless a member's change in the same
// request explains the new hash alone.
func (g *Group) cNoteTopics(h *hbReq, changed bool) {
	if !g.s.tracks() {
		return
	}
	cg := g.cg
	v, av := g.s.cfg.Topics.Version(), cg.accessVersion()
	aclOnly := cg.hist.topics != nil && v == cg.hist.topicsAt && av != cg.hist.accessAt
	cg.hist.topicsAt, cg.hist.accessAt = v, av
	if !changed && cg.hist.topics != nil {
		return
	}
	now := g.topicSnapshot()
	prev := cg.hist.topics
	cg.hist.topics = now
	if !changed {
		return
	}
	memberCause := len(h.causes) > 0
	if aclOnly && !memberCause {
		g.cNoteAccess(h, prev, now)
		return
	}
	var names, what []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		n := now[name]
		p, had := prev[name]
		switch {
		case had && p.partitions < 0 && n.partitions >= 0, !had && !memberCause && n.partitions >= 0 && prev != nil:
			what = append(what, fmt.Sprintf("created %s (%d partitions)", name, n.partitions))
		case had && p.partitions >= 0 && n.partitions < 0:
			what = append(what, "deleted "+name)
		case had && p.partitions >= 0 && p.partitions != n.partitions:
			what = append(what, fmt.Sprintf("%s partitions %d -> %d", name, p.partitions, n.partitions))
		default:
			continue
		}
		names = append(names, name)
	}
	if !memberCause {
		for _, name := range slices.Sorted(maps.Keys(prev)) {
			if _, ok := now[name]; !ok && prev[name].partitions >= 0 {
				what = append(what, "deleted "+name)
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 && memberCause {
		return
	}
	c := Cause{Kind: CauseTopicsChanged, At: h.now, Topics: names, Detail: strings.Join(what, "; ")}
	if len(names) == 0 {
		c.Detail = "the subscribed topics' metadata changed"
	}
	g.cNote(h, c)
}

// cNoteAccess notes a new target needed because the ACLs changed which
// topics the members' regexes give them (the catalog did not change): the
// topics the group gained or lost, if any (a topic one member gains while
// another already had it changes no topic of the group, only that member's
// share).
func (g *Group) cNoteAccess(h *hbReq, prev, now map[string]topicSnap) {
	var names, what []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		if _, had := prev[name]; !had {
			names, what = append(names, name), append(what, "now given "+name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := now[name]; !ok && prev[name].partitions >= 0 {
			names, what = append(names, name), append(what, "no longer given "+name)
		}
	}
	detail := "the ACLs changed which topics the members' regexes give them"
	if len(what) > 0 {
		detail += ": " + strings.Join(what, "; ")
	}
	g.cNote(h, Cause{Kind: CauseTopicsChanged, At: h.now, Topics: names, Detail: detail})
}

// topicSnapshot returns the subscribed topics' partition counts: every
// topic subscribed by name (-1 if it does not exist) and every existing
// topic a regex matches.
func (g *Group) topicSnapshot() map[string]topicSnap {
	cg := g.cg
	topics := g.s.cfg.Topics
	out := make(map[string]topicSnap, len(cg.subscribers))
	for name := range cg.subscribers {
		out[name] = topicSnap{partitions: -1}
	}
	for _, name := range cg.subscribed(topics) {
		if t, ok := topics.Lookup(name); ok {
			out[name] = topicSnap{partitions: t.Partitions}
		}
	}
	return out
}

// cPre is what cObserve needs of the state before a record applies.
type cPre struct {
	consumer bool
	epoch    int32
	hist     *cHistory
}

// cBefore captures the state cObserve compares r against.
func (g *Group) cBefore(r *rec) cPre {
	if r.kind != keyCGroup || g.cg == nil {
		return cPre{}
	}
	return cPre{consumer: true, epoch: g.cg.epoch, hist: &g.cg.hist}
}

// cObserve follows the event in progress through one record emit replayed.
func (g *Group) cObserve(h *hbReq, r *rec, pre cPre) {
	if !g.s.tracks() {
		return
	}
	switch r.kind {
	case keyCGroup:
		switch {
		case r.del && pre.consumer:
			// The group turned classic (or went): the event ends.
			if rb := pre.hist.rb; rb != nil {
				pre.hist.rb = nil
				rb.more = addMore(rb.more, &rb.cut, maxMoreCauses, Cause{Kind: CauseOther, At: h.now, Detail: "group converted to the classic protocol"})
				g.cFinish(h, rb, "superseded")
			}
		case !r.del && pre.consumer && g.cg != nil && g.cg.epoch > pre.epoch:
			g.cBump(h, pre.epoch)
		}
	case keyCTMeta:
		if cg := g.cg; cg != nil && !r.del {
			if rb := cg.hist.rb; rb != nil && rb.targetAt.IsZero() && cg.assignEpoch >= rb.epoch {
				g.cTargetComputed(h.now, rb)
				g.cMaybeDone(h)
			}
		}
	case keyCCurrent:
		cg := g.cg
		if cg == nil || r.del || cg.hist.rb == nil || cg.hist.rb.targetAt.IsZero() {
			return
		}
		rb := cg.hist.rb
		w, ok := rb.pending[r.c.member]
		m := cg.members[r.c.member]
		if !ok || m == nil {
			return
		}
		if reconciledAt(m, rb.epoch) {
			delete(rb.pending, m.id)
			rb.addWait(Wait{MemberID: m.id, InstanceID: m.instanceID, Phase: w.phaseOf(), WaitedMs: h.now.Sub(rb.targetAt).Milliseconds()})
			g.cMaybeDone(h)
			return
		}
		if m.state == mUnrevoked && w.phase != "revoke" {
			w.phase, w.since, w.revoked = "revoke", h.now, true
		} else if m.state != mUnrevoked && w.phase == "revoke" {
			w.phase, w.since = "assign", h.now
		}
	case keyCMember:
		cg := g.cg
		if cg == nil || !r.del || cg.hist.rb == nil {
			return
		}
		rb := cg.hist.rb
		id := r.c.member
		w, ok := rb.pending[id]
		if !ok {
			return
		}
		delete(rb.pending, id)
		for _, c := range h.causes {
			if c.MemberID == id && (c.Kind == CauseSessionTimeout || c.Kind == CauseRebalanceTimeout) {
				from := rb.targetAt
				if from.IsZero() {
					from = rb.start
				}
				rb.addWait(Wait{MemberID: id, InstanceID: c.InstanceID, Phase: w.phaseOf(), WaitedMs: h.now.Sub(from).Milliseconds(), Evicted: true})
				break
			}
		}
	}
}

// rbConverted is called where a group changes protocol: a classic group
// upgraded to a consumer-protocol group ends its rebalance in progress, if
// any, as superseded (out set); a group downgraded to classic (out nil)
// starts its classic rebalance with a cause that says so.
func (g *Group) rbConverted(now time.Time, detail string, out *Output) {
	if !g.s.tracks() {
		return
	}
	c := Cause{Kind: CauseOther, At: now, Detail: detail}
	if out == nil {
		g.note(c)
		return
	}
	if g.rb != nil {
		g.rb.more = addMore(g.rb.more, &g.rb.cut, maxMoreCauses, c)
		g.rbFinish(now, "superseded", out)
		return
	}
	if w := g.rbWriting; w.open() {
		// The leader gave the assignment, whose write holds the
		// rebalance's event: durable, the rebalance ended there. Should
		// it fail, the rebalance ends here, superseded, as it would have
		// without the assignment: its event is built now, with the
		// classic members and generation the conversion is about to drop
		// (with the rebalances before it whose writes are in flight
		// too, should theirs fail as well).
		w.ended = g.altsOf(w, nil, now, "superseded", func(m *member) []byte { return m.assignment }, &c)
	}
}

// cBump starts the event of the group's new epoch (the one in progress, if
// any, is superseded) with the causes noted in h.
func (g *Group) cBump(h *hbReq, from int32) {
	cg := g.cg
	if rb := cg.hist.rb; rb != nil {
		if len(rb.more) < cMergeCauses && len(cg.members) > 0 {
			g.cExtend(h, rb)
			return
		}
		cg.hist.rb = nil
		g.cFinish(h, rb, "superseded")
	}
	rb := &cTracker{start: h.now, fromEpoch: from, epoch: cg.epoch, pending: map[string]*cWaiting{}}
	if len(h.causes) > 0 {
		rb.cause, rb.more = h.causes[0], slices.Clone(h.causes[1:])
		h.causes = h.causes[:0]
	} else {
		rb.cause = Cause{Kind: CauseOther, At: h.now, Detail: "group epoch bumped"}
	}
	cg.hist.rb = rb
	if rb.counted = g.s.cfg.HistorySize < 0; !rb.counted {
		g.cNoteBefore(rb)
	}
	if len(cg.members) == 0 {
		cg.hist.rb = nil
		g.cFinish(h, rb, "empty")
		return
	}
	if cg.assignEpoch >= rb.epoch {
		g.cTargetComputed(h.now, rb)
	}
}

// cNoteBefore notes each member's partitions at rb's bump (not the members
// its causes added: they are new), for the event's member entries.
func (g *Group) cNoteBefore(rb *cTracker) {
	cg := g.cg
	rb.before, rb.beforeInst = make(map[string][2]tpset, len(cg.ids)), map[string]string{}
	joined := map[string]bool{} // members this request added: new
	for _, c := range append([]Cause{rb.cause}, rb.more...) {
		if c.Kind == CauseMemberJoined {
			joined[c.MemberID] = true
		}
	}
	for _, id := range cg.ids {
		m := cg.members[id]
		if joined[id] {
			continue
		}
		rb.before[id] = [2]tpset{m.assigned, m.pending}
		if m.instanceID != "" {
			rb.beforeInst[m.instanceID] = id
		}
	}
}

// cMergeCauses bounds how many bumps one event takes in: a burst of joins
// (or leaves) is one rebalance, as a classic rebalance gathers every join
// before it completes; a group under continuous churn still ends an event
// (superseded) every cMergeCauses bumps, so the storm detector sees it.
const cMergeCauses = 63

// cExtend takes a bump that comes while rb is in progress into rb: its
// causes join rb's more causes, rb now ends at the new epoch, and whom it
// waits for is counted again from the new target. Recording one event per
// bump instead cost a join burst of N members N events of N members each.
func (g *Group) cExtend(h *hbReq, rb *cTracker) {
	cg := g.cg
	causes := h.causes
	if len(causes) == 0 {
		causes = []Cause{{Kind: CauseOther, At: h.now, Detail: "group epoch bumped"}}
	}
	for _, c := range causes {
		rb.more = addMore(rb.more, &rb.cut, cMergeCauses, c)
	}
	h.causes = h.causes[:0]
	rb.epoch = cg.epoch
	if !rb.targetAt.IsZero() {
		rb.earlier += h.now.Sub(rb.targetAt)
	}
	rb.targetAt = time.Time{}
	clear(rb.pending)
	// The waits of the members fenced on the way stay: the time the
	// replaced target was in force went to them (a member that did not
	// revoke within its rebalance timeout), and no later target waits
	// for them. The others are counted again from the new target.
	rb.waits = slices.DeleteFunc(rb.waits, func(w Wait) bool { return !w.Evicted })
	for i, w := range rb.waits {
		rb.fenced[w.MemberID] = i
	}
	if cg.assignEpoch >= rb.epoch {
		g.cTargetComputed(h.now, rb)
	}
}

// cTargetComputed: the target at rb.epoch exists; every member not at it
// is waited for from now.
func (g *Group) cTargetComputed(now time.Time, rb *cTracker) {
	cg := g.cg
	rb.targetAt = now
	for _, id := range cg.ids {
		m := cg.members[id]
		if reconciledAt(m, rb.epoch) {
			rb.addWait(Wait{MemberID: id, InstanceID: m.instanceID, Phase: "assign"})
			continue
		}
		w := &cWaiting{since: now, phase: "assign"}
		if m.state == mUnrevoked || losesPartitions(m, cg.target[id]) {
			// Revoking, or about to be told to (at its next
			// heartbeat): the group waits for this member to give
			// partitions up, not for others to.
			w.phase, w.revoked = "revoke", true
		}
		rb.pending[id] = w
	}
}

// cMaybeDone completes the event once every member is reconciled.
func (g *Group) cMaybeDone(h *hbReq) {
	cg := g.cg
	rb := cg.hist.rb
	if rb == nil || rb.targetAt.IsZero() || len(rb.pending) > 0 {
		return
	}
	cg.hist.rb = nil
	g.cFinish(h, rb, "stable")
}

// cLoaded starts, for a consumer group loaded while not Stable (nor Empty),
// the event of its rebalance in progress, with cause loaded.
func (g *Group) cLoaded(now time.Time) {
	cg := g.cg
	if !g.s.tracks() || cg == nil || cg.hist.rb != nil {
		return
	}
	st := cg.state()
	if st == "Stable" || st == "Empty" {
		return
	}
	c := Cause{Kind: CauseLoaded, At: now, Detail: fmt.Sprintf("group loaded %s at epoch %d", st, cg.epoch)}
	rb := &cTracker{start: now, fromEpoch: cg.epoch, epoch: cg.epoch, cause: c, pending: map[string]*cWaiting{},
		counted: g.s.cfg.HistorySize < 0}
	if !rb.counted {
		g.cNoteBefore(rb) // its cause joins no member: every member's
	}
	cg.hist.rb = rb
	if cg.assignEpoch >= cg.epoch {
		g.cTargetComputed(now, rb)
	}
}

// cFinish completes rb with outcome and emits it as a history record.
func (g *Group) cFinish(h *hbReq, rb *cTracker, outcome string) {
	s := g.s
	now := h.now
	ev := RebalanceEvent{Group: g.id, Type: "consumer", ProtocolType: "consumer", FromGeneration: rb.fromEpoch,
		Generation: rb.epoch, Start: rb.start, End: now, Outcome: outcome, Cause: rb.cause, MoreCauses: rb.more,
		CutCauses: rb.cut, DurationMs: now.Sub(rb.start).Milliseconds(), Evicted: rb.evicted, WaitedFor: rb.waits}
	ev.inUTC()
	if !rb.targetAt.IsZero() {
		ev.JoinMs = rb.targetAt.Sub(rb.start).Milliseconds()
		ev.SyncMs = ev.DurationMs - ev.JoinMs // rounded once: join_ms + sync_ms = duration_ms
	} else {
		ev.JoinMs = ev.DurationMs
	}
	ev.EarlierTargetMs = min(rb.earlier.Milliseconds(), ev.JoinMs)
	cg := g.cg
	if cg != nil && len(cg.ids) > 0 {
		ev.Protocol = cg.preferredAssignor(s.cfg.ConsumerAssignors)
	}
	if s.cfg.HistorySize < 0 {
		// A node without history tells the event only to count it: its
		// lists, built per member, are left out.
		ev.WaitedFor, ev.Evicted = nil, nil
		for _, r := range s.historyRecs(&ev) {
			g.emit(h, r)
		}
		return
	}
	for id, w := range rb.pending { // superseded: still waited for
		inst := ""
		if cg != nil && cg.members[id] != nil {
			inst = cg.members[id].instanceID
		}
		if _, ok := rb.fenced[id]; ok {
			continue // listed by its fencing (addWait)
		}
		ev.WaitedFor = append(ev.WaitedFor, Wait{MemberID: id, InstanceID: inst, Phase: w.phaseOf(), WaitedMs: now.Sub(rb.targetAt).Milliseconds()})
	}
	var omitted Omitted
	ev.WaitedFor, omitted.WaitedFor = storeWaits(ev.WaitedFor)
	if cg != nil {
		// Entries only for the members the stored event can list
		// (storeCandidates, historybound.go).
		type before struct {
			prev [2]tpset
			had  bool
		}
		prevs := make([]before, len(cg.ids))
		for i, id := range cg.ids {
			prev, had := rb.before[id]
			if m := cg.members[id]; !had && m.instanceID != "" {
				if old, ok := rb.beforeInst[m.instanceID]; ok {
					prev, had = rb.before[old]
				}
			}
			prevs[i] = before{prev, had}
		}
		keep, omittedMembers := storeCandidates(len(cg.ids), func(i int) string { return cg.ids[i] },
			func(i int) bool {
				return !prevs[i].had || !equalUnion(cg.target[cg.ids[i]], prevs[i].prev[0], prevs[i].prev[1])
			})
		omitted.Members = omittedMembers
		ev.Members = make([]MemberChange, 0, len(keep))
		for _, i := range keep {
			id := cg.ids[i]
			m, prev, had := cg.members[id], prevs[i].prev, prevs[i].had
			before := tpset{}
			for _, set := range prev {
				before.addSet(set)
			}
			after := cg.target[id]
			if after == nil {
				after = tpset{}
			}
			added, removed := diffSets(after, before), diffSets(before, after)
			ev.Members = append(ev.Members, MemberChange{MemberID: id, InstanceID: m.instanceID, ClientID: m.clientID,
				ClientHost: m.clientHost, Decoded: true, Partitions: after.size(), Added: added, Removed: removed,
				Changed: len(added)+len(removed) > 0, New: !had})
		}
	}
	if omitted != (Omitted{}) {
		ev.Omitted = &omitted
	}
	recs := s.historyRecs(&ev)
	for _, r := range recs {
		g.emit(h, r)
	}
	// The observer and the storm detector learn of the event once the
	// write holding it is durable (Shard.eventsDurable).
}

// equalUnion reports whether s holds exactly the partitions of a and b
// together, without building their union.
func equalUnion(s, a, b tpset) bool {
	for _, o := range []tpset{a, b} {
		for t, ps := range o {
			for _, p := range ps {
				if !s.has(t, p) {
					return false
				}
			}
		}
	}
	for t, ps := range s {
		for _, p := range ps {
			if !a.has(t, p) && !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// tpsetString renders a set as "t[0 1] u[3]".
func tpsetString(s tpset) string {
	var b strings.Builder
	for i, t := range s.topics() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%v", t, s[t])
	}
	return b.String()
}

// cWaitingView is the "now" view of a consumer group that is not Stable:
// the members not reconciled to the target, since when, and (revoking) when
// the rebalance timeout fences them.
func (g *Group) cWaitingView() *Waiting {
	cg := g.cg
	st := cg.state()
	if st == "Stable" || st == "Empty" {
		return nil
	}
	w := &Waiting{State: st, Since: g.stateTime, Members: []WaitingMember{}}
	rb := cg.hist.rb
	if rb != nil {
		w.Since = rb.start
		c := rb.cause
		w.Cause = &c
	}
	if cg.assignEpoch < cg.epoch {
		return w // Assigning: the next heartbeat computes the target
	}
	settled := !cg.converging()
	if settled {
		// Only static members away for a restart keep the group from
		// Stable: no rebalance is in progress, the group waits for
		// their instance ids (or their sessions to end).
		w.Since, w.Cause, w.OnlyAway = time.Time{}, nil, true
	}
	for _, id := range cg.ids {
		m := cg.members[id]
		if m.epoch == epochStatic {
			w.Members = append(w.Members, WaitingMember{MemberID: id, InstanceID: m.instanceID, ClientID: m.clientID,
				ClientHost: m.clientHost, Phase: "away", Since: m.awayAt, Deadline: deadlineOf(m.session)})
			if settled && !m.awayAt.IsZero() && (w.Since.IsZero() || m.awayAt.Before(w.Since)) {
				w.Since = m.awayAt
			}
			continue
		}
		if reconciledAt(m, cg.assignEpoch) {
			continue
		}
		wm := WaitingMember{MemberID: id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Phase: "assign", Since: w.Since}
		if rb != nil {
			if pw, ok := rb.pending[id]; ok {
				wm.Since = pw.since
			} else if !rb.targetAt.IsZero() {
				wm.Since = rb.targetAt
			}
		}
		switch {
		case m.state == mUnrevoked:
			wm.Phase, wm.Deadline = "revoke", deadlineOf(m.rebalance)
		case losesPartitions(m, cg.target[id]):
			// It must give partitions up and learns so at its next
			// heartbeat; its rebalance timeout starts then.
			wm.Phase = "revoke"
		}
		w.Members = append(w.Members, wm)
	}
	return w
}
