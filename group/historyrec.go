package group

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/s2"
)

// How the shard records rebalances (docs/history.md).
//
// A classic group's rebalance starts when the group leaves Stable, Empty or
// CompletingRebalance for PreparingRebalance and ends when the leader gives
// the assignment (the event is written with it, and counted once that write
// is durable) or the group is Empty: one RebalanceEvent, however many times
// the join phase restarts on the way (a failed assignment write reopens it). The first trigger is its
// Cause; triggers while it is in progress (a member leaving, timing out or
// changing its metadata) are MoreCauses. The tracker below is memory only: a
// rebalance cut short by an unload is not recorded (the group is loaded
// Stable, and a rebalance it then starts names CauseLoaded).
//
// The completed event is a record of its own kind (keyHistory), written like
// any other record and applied by replay once durable and on load, so the
// history survives a restart and a failover. A rebalance that ends Stable
// is written with the leader's assignment, in the same write (rbAssigned):
// the event is durable, told and counted exactly when the assignment is, by
// the node that issued the write even if it unloads the partition meanwhile
// (historylate.go). The shard keeps the history
// apart from the groups (Shard.hist), so that a record of history never makes
// a group exist.

// keyHistory: 0x09, uvarint len + group id, uint64 seq (big endian). Value:
// uint16 version, then the RebalanceEvent as JSON: as is (version 0,
// written before the history was compressed) or compressed as one S2 block
// (version 1, Snappy's successor format). An event's JSON repeats its member
// ids and field names; compressed it takes about a third of the bytes on
// disk and, more to the point, in the memory of a loaded partition, which
// keeps every group's events undecoded until they are read: at 100,000
// groups the history was a fifth of the loaded state.
const (
	keyHistory         byte   = 0x09
	historyValueJSON   uint16 = 0
	historyValueS2     uint16 = 1
	historyValueLatest        = historyValueS2
)

func historyKey(group string, seq uint64) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(group)+8)
	k = append(k, keyHistory)
	k = appendString(k, group)
	return binary.BigEndian.AppendUint64(k, seq)
}

// ghist is one group's history: events sorted by Seq, at most HistorySize.
type ghist struct {
	events []RebalanceEvent
	// loaded are events read from the store and not decoded yet, in load
	// order: decoding the JSON of every group's history was a quarter of
	// a partition's load; most groups' history is never read before their
	// next rebalance (see events).
	loaded []rawEvent
	// trimmed lists stored events no longer kept in memory: past the
	// bound (--group-history lowered since they were written) or
	// undecodable. The group's next event, or its deletion, writes their
	// tombstones; until then they are stored, and a deletion that
	// forgot them let them come back at the next load.
	trimmed []uint64
	// writing lists the seqs of a classic group's events still being
	// written (recordEvent, rbAssigned): a deletion in the meantime
	// tombstones them too, since they reach the store before its
	// tombstones.
	writing []uint64
	// unstored lists the seqs of a consumer group's events applied with a
	// write that is not durable yet (writeApplied): the storm detector
	// leaves them out until it is (eventsDurable), so that a storm is
	// flagged only by stored rebalances. Flagged by one in flight, a
	// storm was counted, and counted again when that write failed, the
	// partition reloaded without it and the group's next rebalance took
	// it over the threshold anew.
	unstored []uint64
	// held are the events recorded while a write holding an earlier
	// event, told once durable (a classic assignment's, a consumer
	// group's completing write), was in flight, by that event's seq:
	// told to OnRebalance once its outcome is known (recordEvent).
	held    map[uint64][]RebalanceEvent
	nextSeq uint64 // every stored seq is below it
	flagged bool   // the storm flag last reported (OnStorm)
	// evictionsStored: events were loaded from the store, and the
	// group's recent evictions (rejoin.go) are to be rebuilt from them
	// before its next cause is linked.
	evictionsStored bool
	timer           *timer // re-evaluates the storm flag when the window slides; nil until first armed
}

// rawEvent is a stored event not decoded yet.
type rawEvent struct {
	seq uint64
	raw []byte
}

// all decodes the loaded events into events (in Seq order, at most
// HistorySize) and returns them. An event that does not decode is dropped,
// and said: the history is a diagnostic, a damaged record of it must not
// keep the partition from loading.
func (s *Shard) all(group string, h *ghist) []RebalanceEvent {
	for _, le := range h.loaded {
		ev, err := decodeEvent(group, le.seq, le.raw)
		if err != nil {
			s.logf("%v: dropped", err)
			h.trimmed = append(h.trimmed, le.seq)
			continue
		}
		h.put(*ev)
	}
	h.loaded = nil
	h.trim(s.cfg.HistorySize)
	return h.events
}

// trim keeps the newest n events in memory (n > 0), noting the others as
// trimmed.
func (h *ghist) trim(n int) {
	if n <= 0 || len(h.events) <= n {
		return
	}
	for _, e := range h.events[:len(h.events)-n] {
		h.trimmed = append(h.trimmed, e.Seq)
	}
	h.events = slices.Delete(h.events, 0, len(h.events)-n)
}

// put inserts ev in Seq order (replacing an event of the same Seq).
func (h *ghist) put(ev RebalanceEvent) {
	i, found := slices.BinarySearchFunc(h.events, ev.Seq, func(e RebalanceEvent, seq uint64) int {
		switch {
		case e.Seq < seq:
			return -1
		case e.Seq > seq:
			return 1
		}
		return 0
	})
	if found {
		h.events[i] = ev
	} else {
		h.events = slices.Insert(h.events, i, ev)
	}
}

// rbTracker follows the rebalance in progress of a classic group.
type rbTracker struct {
	// seq is the event's seq once the leader gave the assignment
	// (rbAssigned): the write holding it is in flight until its outcome.
	seq uint64
	// ended: while this one's assignment was written, the rebalance it
	// goes on as if the write fails ended: the next one (rbFinish:
	// recorded, rewritten then), or this one, converted (rbConverted:
	// recorded then, at this write's seq: its events' Seq is 0 until).
	// Only an open tracker gets it.
	ended *alts
	// next: the rebalance after this one, whose leader gave its
	// assignment while this one's was being written (rbAssigned); its
	// cont is the one event both are, should this one's write fail.
	// prev, on next: this one while its write is in flight (linked back
	// by its next); once failed, merged with those failed before it
	// (failedRun in a row), no next. Outcomes come in write order: at
	// next's own (rbAssignWritten), prev, if set, has failed.
	next, prev *rbTracker
	failedRun  int
	cont       *alts

	start      time.Time
	fromGen    int32
	cause      Cause
	more       []Cause
	cut        map[CauseKind]int // causes past more's bound (RebalanceEvent.CutCauses)
	phaseStart time.Time         // start of the current join or sync phase
	syncing    bool              // in the sync phase
	// initialDelay: a join phase of it began with the initial rebalance
	// delay (a group that was Empty, KIP-134).
	initialDelay bool
	// join and sync add up the phases' lengths, rounded to milliseconds
	// once at the end so that join_ms + sync_ms = duration_ms.
	join, sync time.Duration
	joinedAt   map[string]time.Time // first JoinGroup of each member this phase
	syncedAt   map[string]time.Time
	joinWaits  []Wait // the last join phase's waits (a member at most once)
	syncWaits  []Wait
	evicted    []string
	before     map[string][]byte // member id -> assignment before
	beforeInst map[string]string // instance id -> member id before (static renames)
}

// maxMoreCauses bounds an event's MoreCauses (the storm detector counts
// their kinds; the ones past it are counted in CutCauses).
const maxMoreCauses = 64

// addMore appends c to more, or, when more already holds limit causes,
// counts it in *cut by kind (RebalanceEvent.CutCauses).
func addMore(more []Cause, cut *map[CauseKind]int, limit int, c Cause) []Cause {
	if len(more) < limit {
		return append(more, c)
	}
	if *cut == nil {
		*cut = map[CauseKind]int{}
	}
	(*cut)[c.Kind]++
	return more
}

// cause builds a Cause about member m (nil: none).
func causeOf(kind CauseKind, now time.Time, m *member) Cause {
	c := Cause{Kind: kind, At: now}
	if m != nil {
		c.MemberID, c.InstanceID, c.ClientID, c.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
	}
	return c
}

// tracks reports whether the shard follows rebalances: it keeps a history
// (Config.HistorySize >= 0), or it keeps none but has an observer
// (OnRebalance: the node's rebalance metrics), which is then told each
// rebalance as it would be with history, from events that are neither
// stored nor kept. Before, a node without history told the observer
// nothing, and counted no rebalance.
func (s *Shard) tracks() bool { return s.cfg.HistorySize >= 0 || s.cfg.OnRebalance != nil }

// note records a trigger: it starts the group's rebalance event if none is in
// progress, else it is one more cause of the one in progress.
func (g *Group) note(c Cause) {
	if !g.s.tracks() {
		return
	}
	g.linkRejoin(&c)
	if g.rb != nil {
		g.rb.more = addMore(g.rb.more, &g.rb.cut, maxMoreCauses, c)
		return
	}
	if g.loaded && c.Kind == CauseMetadataChanged {
		// The first rejoin after a load: a loaded member knows only the
		// selected protocol, so its full list reads as a change.
		c.Kind, c.Detail = CauseLoaded, "member rejoined after the group was loaded"
	}
	g.loaded = false
	rb := &rbTracker{start: c.At, fromGen: g.generation, cause: c, phaseStart: c.At}
	g.rb = rb
	if g.s.cfg.HistorySize < 0 {
		return // counted, not kept: no member's wait nor entry is built (rbEvent)
	}
	rb.joinedAt, rb.syncedAt = map[string]time.Time{}, map[string]time.Time{}
	rb.before, rb.beforeInst = make(map[string][]byte, len(g.members)), map[string]string{}
	for _, m := range g.members {
		rb.before[m.id] = m.assignment
		if m.instanceID != "" {
			rb.beforeInst[m.instanceID] = m.id
		}
	}
	g.rb = rb
}

// rbJoined records a member's JoinGroup during the join phase.
func (g *Group) rbJoined(now time.Time, m *member) {
	if rb := g.rb; rb != nil && !rb.syncing && g.s.cfg.HistorySize >= 0 {
		if _, ok := rb.joinedAt[m.id]; !ok {
			rb.joinedAt[m.id] = now
		}
	}
}

// rbSynced records a member's SyncGroup during the sync phase.
func (g *Group) rbSynced(now time.Time, m *member) {
	if rb := g.rb; rb != nil && rb.syncing && g.s.cfg.HistorySize >= 0 {
		if _, ok := rb.syncedAt[m.id]; !ok {
			rb.syncedAt[m.id] = now
		}
	}
}

// rbEvict records members removed during the rebalance.
func (g *Group) rbEvict(m *member, phase string, now time.Time) {
	rb := g.rb
	if rb == nil {
		return
	}
	rb.evicted = append(rb.evicted, m.id)
	w := Wait{MemberID: m.id, InstanceID: m.instanceID, Phase: phase, WaitedMs: now.Sub(rb.phaseStart).Milliseconds(), Evicted: true}
	// m is removed next: phaseWaits, which lists the members still in
	// the group, does not list it again. A session that expires in the
	// sync phase replaces m's wait in the join phase, which already lists
	// it, and is a wait of the sync phase: the expiry starts a new join
	// phase, which clears the join phase's waits, and the sync phase's
	// stay until the next one begins. Before, it went with the join
	// phase's and was cleared with them, so a rebalance that then ended
	// Empty listed the member only in evicted.
	if rb.syncing && phase == "session" {
		rb.joinWaits = slices.DeleteFunc(rb.joinWaits, func(o Wait) bool { return o.MemberID == m.id })
	}
	if phase == "sync" || rb.syncing {
		rb.syncWaits = append(rb.syncWaits, w)
	} else {
		rb.joinWaits = append(rb.joinWaits, w)
	}
}

// rbPrepare: the join phase (re)starts (prepareRebalance).
func (g *Group) rbPrepare(now time.Time) {
	if !g.s.tracks() {
		return
	}
	if g.rb == nil {
		g.note(Cause{Kind: CauseOther, At: now})
	}
	rb := g.rb
	if rb.syncing {
		rb.sync += now.Sub(rb.phaseStart)
		rb.syncing = false
	}
	rb.phaseStart = now
	clear(rb.joinedAt)
	rb.joinWaits = nil
	if rb.joinedAt == nil {
		return // no history kept: no waits (note)
	}
	for _, m := range g.members {
		if m.join != nil { // already parked (the member whose join started it)
			rb.joinedAt[m.id] = now
		}
	}
}

// rbJoinDone: the join barrier completed with members (CompletingRebalance).
func (g *Group) rbJoinDone(now time.Time) {
	rb := g.rb
	if rb == nil {
		return
	}
	rb.join += now.Sub(rb.phaseStart)
	if g.s.cfg.HistorySize >= 0 {
		rb.joinWaits = g.phaseWaits(rb.phaseStart, now, "join", rb.joinedAt, rb.joinWaits)
	}
	rb.syncing = true
	rb.phaseStart = now
	clear(rb.syncedAt)
	rb.syncWaits = nil
}

// phaseWaits adds to waits how long the phase that ends at now waited for
// each member (arrived: when each came; a member that did not, all of it).
func (g *Group) phaseWaits(start, now time.Time, phase string, arrived map[string]time.Time, waits []Wait) []Wait {
	waits = slices.Grow(waits, len(g.members))
	for _, m := range g.members {
		at, ok := arrived[m.id]
		if !ok {
			at = now
		}
		waits = append(waits, Wait{MemberID: m.id, InstanceID: m.instanceID, Phase: phase, WaitedMs: at.Sub(start).Milliseconds()})
	}
	return waits
}

// rbFinish completes the event: the group is Empty, or superseded by a
// conversion to the consumer protocol. (A rebalance that ends Stable is
// recorded with the leader's assignment: rbAssigned.)
func (g *Group) rbFinish(now time.Time, outcome string, out *Output) {
	if g.rb == nil {
		return
	}
	cur := func(m *member) []byte { return m.assignment }
	ev := g.rbEvent(g.rb, now, outcome, cur)
	var a *alts
	w := g.rbWriting
	if w.open() {
		// The rebalance before this one gave its assignment, whose write
		// (holding its event) is still in flight. Should it fail, that
		// rebalance did not end there but went on through this one: the
		// one event it then is, built now, replaces this one's
		// (rbAssignWritten).
		a = g.altsOf(w, g.rb, now, outcome, cur, nil)
	}
	g.rb = nil
	seq := g.s.recordEvent(ev, w, out)
	if a != nil && seq != 0 {
		a.setSeq(seq)
		w.ended = a
	}
}

// open tells whether w, the rebalance whose assignment is being written,
// may still be continued by the next one, should that write fail: no
// rebalance after it ended yet, nor the group converted (ended). Asked only
// of g.rbWriting, never linked to a next one (rbAssigned moves it on).
func (w *rbTracker) open() bool {
	return w != nil && w.ended == nil
}

// alts are the events one end of a rebalance makes, one for each outcome
// of the assignment writes in flight when it ended: those of w (the
// rebalance whose write was the last) and, through prev, of the
// rebalances before it whose writes were still in flight too. evs[k] is
// the one event when w's write and the k before it failed (the one before
// those, if any, stored). Each is built when the rebalance ends, from the
// group as it is then; the outcomes, known later, pick one (pick).
type alts struct {
	evs []RebalanceEvent
	// base is the failedRun of the oldest of those rebalances then.
	base int
}

// pick returns the event when w's write failed, run (w.failedRun) the
// writes before it that failed in a row.
func (a *alts) pick(run int) RebalanceEvent {
	return a.evs[min(max(run-a.base, 0), len(a.evs)-1)]
}

func (a *alts) setSeq(seq uint64) {
	for i := range a.evs {
		a.evs[i].Seq = seq
	}
}

// altsOf builds the alts of a rebalance's end while w's assignment write is
// in flight: cur (not nil) ended and continued w's; nil, w's own rebalance
// ends, with one more cause (more, not nil): superseded by a conversion.
func (g *Group) altsOf(w, cur *rbTracker, now time.Time, outcome string, assign func(m *member) []byte, more *Cause) *alts {
	chain := []*rbTracker{w} // w, then the rebalances before it still written
	for t := w; t.prev != nil && t.prev.next == t; t = t.prev {
		chain = append(chain, t.prev)
	}
	oldest := chain[len(chain)-1]
	a := &alts{base: oldest.failedRun}
	for k := range chain {
		m := chain[k].clone()
		if k == len(chain)-1 && oldest.prev != nil {
			m = oldest.prev.continuedBy(oldest) // failed already
		}
		for j := k - 1; j >= 0; j-- {
			m = m.absorb(chain[j])
		}
		if cur != nil {
			m = m.absorb(cur)
		}
		if more != nil {
			m.more = addMore(m.more, &m.cut, maxMoreCauses, *more)
		}
		a.evs = append(a.evs, g.rbEvent(m, now, outcome, assign))
	}
	return a
}

// rbAssigned completes the event of a rebalance whose leader gave the
// assignment (assign: each member's) and returns the records that store it,
// to be written with the assignment: the store then has both or neither. A
// rebalance was before recorded once the assignment was durable, in a write
// of its own, which a shard unloaded meanwhile never issued: such a
// rebalance was counted by no node and missing from the history the next
// owner loaded. The tracker is returned too, closed (a trigger while the
// write is in flight starts the next rebalance): rbAssignFailed reopens it
// if the write fails. Nil, nil when no event is in progress.
func (g *Group) rbAssigned(now time.Time, assign func(m *member) []byte) ([]rec, *rbTracker) {
	rb := g.rb
	if rb == nil || !g.s.tracks() {
		return nil, nil
	}
	ev := g.rbEvent(rb, now, "stable", assign)
	var a *alts
	w := g.rbWriting
	if w.open() {
		// As in rbFinish: the previous rebalance's assignment write is
		// in flight; should it fail, this event is the one both are.
		a = g.altsOf(w, rb, now, "stable", assign, nil)
	}
	recs := g.s.historyRecs(&ev)
	rb.seq = ev.Seq
	if a != nil {
		a.setSeq(ev.Seq)
		w.next, rb.prev, rb.cont = rb, w, a
	}
	h := g.s.hist[g.id]
	h.writing = append(h.writing, ev.Seq)
	g.rb, g.rbWriting = nil, rb
	return recs, rb
}

// rbAssignWritten is told the outcome of the write of rbAssigned's records
// (event seq, tracker rb). Once durable, WriteDone has put the event in the
// history and told it (writeEvents). A failed write stored neither the
// assignment nor the event: its seq is given back if no later event took
// one, and the rebalance goes on with its tracker, reopened, or merged into
// the one a trigger opened meanwhile; or, if the group was converted to the
// consumer protocol meanwhile, it ends superseded (rbConverted). Either
// way, the events recorded while the write was in flight are told then
// (recordEvent). Unload's NOT_COORDINATOR leaves the event, and those, to
// the late outcome (historylate.go).
func (g *Group) rbAssignWritten(now time.Time, seq uint64, rb *rbTracker, gen int32, code int16, out *Output) {
	if g.rbWriting == rb {
		g.rbWriting = nil
	}
	if g.s.unloading {
		// The late write (keepLate) has the events held and rb, whose
		// links its outcome needs (lateFailed).
		if h := g.s.hist[g.id]; h != nil {
			h.writing = slices.DeleteFunc(h.writing, func(s uint64) bool { return s == seq })
		}
		return
	}
	ended, next, prev, cont, run := rb.ended, rb.next, rb.prev, rb.cont, rb.failedRun
	rb.ended, rb.next, rb.prev, rb.cont = nil, nil, nil, nil
	converted := ended != nil && ended.evs[0].Seq == 0
	if next != nil {
		next.prev = nil
	}
	h := g.s.hist[g.id]
	var held []RebalanceEvent
	if h != nil {
		h.writing = slices.DeleteFunc(h.writing, func(s uint64) bool { return s == seq })
		held = h.takeHeld(seq)
	}
	defer g.s.tell(held)
	if code == ErrNone && prev != nil && cont != nil && g.live() {
		// The rebalance before, whose write failed, went on through
		// this one, now stored: its event becomes the one both are.
		g.s.rewriteEvent(cont.pick(run-1), out)
	}
	if code == ErrNone {
		return
	}
	if h != nil && h.nextSeq == seq && !converted {
		h.nextSeq = seq - 1
	}
	if prev != nil {
		rb = prev.continuedBy(rb) // both failed: one rebalance, going on
	}
	switch {
	case next != nil:
		// The next rebalance's assignment is being written (after this
		// write): its outcome decides what becomes of this one.
		next.prev, next.failedRun = rb, run+1
	case converted:
		// Recorded at the seq the failed write held: it is that
		// rebalance's event, and it comes before the events held.
		g.s.recordEventAt(ended.pick(run), seq, out)
	case ended != nil:
		// The rebalance a trigger started during the write has ended
		// and was recorded: it continued this one, and its event is
		// rewritten as the one event both are (rbFinish), at its seq,
		// unless the group is gone meanwhile (its tombstones are
		// written). Its telling was held until now: the observer hears
		// the one event.
		ev := ended.pick(run)
		if g.live() {
			g.s.rewriteEvent(ev, out)
		}
		for i := range held {
			if held[i].Seq == ev.Seq {
				held[i] = ev
			}
		}
	case g.cg != nil:
	case g.rb != nil:
		g.rb = rb.absorb(g.rb)
	case g.generation == gen && g.state == CompletingRebalance:
		g.rb = rb
	}
}

// clone copies rb, without its links to other rebalances.
func (rb *rbTracker) clone() *rbTracker {
	m := *rb
	m.more, m.evicted = slices.Clip(rb.more), slices.Clip(rb.evicted)
	m.cut = maps.Clone(rb.cut)
	m.ended, m.next, m.prev, m.cont = nil, nil, nil, nil
	return &m
}

// continuedBy is absorb on a copy of rb, which stays as it is.
func (rb *rbTracker) continuedBy(cur *rbTracker) *rbTracker { return rb.clone().absorb(cur) }

// live tells whether g is still the shard's group of its id (not deleted).
func (g *Group) live() bool { return g.s.groups[g.id] == g && g.state != Dead }

// absorb continues rb, whose completing write failed, with cur, the
// rebalance a trigger started while that write was in flight: one event,
// as if the write had failed before the trigger. rb's sync phase lasted
// until cur started; cur's causes follow rb's, and its phases are the last.
func (rb *rbTracker) absorb(cur *rbTracker) *rbTracker {
	for _, c := range append([]Cause{cur.cause}, cur.more...) {
		rb.more = addMore(rb.more, &rb.cut, maxMoreCauses, c)
	}
	for k, n := range cur.cut {
		if rb.cut == nil {
			rb.cut = map[CauseKind]int{}
		}
		rb.cut[k] += n
	}
	if rb.syncing {
		rb.sync += cur.start.Sub(rb.phaseStart)
	}
	rb.join += cur.join
	rb.sync += cur.sync
	rb.initialDelay = rb.initialDelay || cur.initialDelay
	rb.evicted = append(rb.evicted, cur.evicted...)
	rb.phaseStart, rb.syncing = cur.phaseStart, cur.syncing
	rb.joinedAt, rb.syncedAt = cur.joinedAt, cur.syncedAt
	rb.joinWaits, rb.syncWaits = cur.joinWaits, cur.syncWaits
	return rb
}

// rbEvent builds the event of the rebalance rb follows, ended at now with
// outcome, each member's assignment after it given by assign. It leaves rb
// as it was (rbAssignWritten may reopen it).
func (g *Group) rbEvent(rb *rbTracker, now time.Time, outcome string, assign func(m *member) []byte) RebalanceEvent {
	kept := g.s.cfg.HistorySize >= 0
	join, sync, syncWaits := rb.join, rb.sync, rb.syncWaits
	if rb.syncing {
		sync += now.Sub(rb.phaseStart)
		if kept {
			syncWaits = g.phaseWaits(rb.phaseStart, now, "sync", rb.syncedAt, slices.Clip(syncWaits))
		}
	} else {
		join += now.Sub(rb.phaseStart)
	}
	ev := RebalanceEvent{Group: g.id, Type: "classic", ProtocolType: g.protocolType,
		FromGeneration: rb.fromGen, Generation: g.generation, Start: rb.start, End: now, Outcome: outcome,
		Cause: rb.cause, MoreCauses: slices.Clip(rb.more), CutCauses: maps.Clone(rb.cut), DurationMs: now.Sub(rb.start).Milliseconds(),
		JoinMs: join.Milliseconds(), SyncMs: (join + sync).Milliseconds() - join.Milliseconds(), Leader: g.leader, Protocol: g.protocol, Evicted: slices.Clip(rb.evicted),
		InitialDelay: rb.initialDelay}
	ev.inUTC()
	if !kept {
		// A node without history tells the event only to count it: its
		// lists, built per member, are left out.
		ev.Evicted = nil
		return ev
	}
	// storeWaits reorders what it is given: a list of its own.
	waits := slices.Concat(rb.joinWaits, syncWaits)
	var omitted Omitted
	ev.WaitedFor, omitted.WaitedFor = storeWaits(waits)
	// The members' entries: only for those the stored event can list
	// (storeCandidates); whether an assignment changed is told by its
	// bytes, before anything is decoded.
	type before struct {
		prev []byte
		had  bool
	}
	prevs := make([]before, len(g.members))
	for i, m := range g.members {
		prev, had := rb.before[m.id]
		if !had && m.instanceID != "" { // a static member replaced: compare with its predecessor
			if id, ok := rb.beforeInst[m.instanceID]; ok {
				prev, had = rb.before[id]
			}
		}
		prevs[i] = before{prev, had}
	}
	keep, omittedMembers := storeCandidates(len(g.members), func(i int) string { return g.members[i].id },
		func(i int) bool { return !prevs[i].had || !bytes.Equal(prevs[i].prev, assign(g.members[i])) })
	omitted.Members = omittedMembers
	decode := g.protocolType == "consumer"
	ev.Members = make([]MemberChange, 0, len(keep))
	for _, i := range keep {
		m, prev, had := g.members[i], prevs[i].prev, prevs[i].had
		a := assign(m)
		mc := MemberChange{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			AssignmentBytes: len(a), Changed: !bytes.Equal(prev, a), New: !had}
		if decode {
			after, ok1 := parseAssignment(a)
			before, ok2 := tpset{}, true
			if len(prev) > 0 {
				before, ok2 = parseAssignment(prev)
			}
			if ok1 && ok2 {
				mc.Decoded = true
				mc.Partitions = after.size()
				mc.Added, mc.Removed = diffSets(after, before), diffSets(before, after)
			}
		}
		ev.Members = append(ev.Members, mc)
	}
	if omitted != (Omitted{}) {
		ev.Omitted = &omitted
	}
	return ev
}

// sortWaits orders waits slowest first (then by phase and member id).
func sortWaits(ws []Wait) { slices.SortFunc(ws, compareWaits) }

// compareWaits is sortWaits' order.
func compareWaits(a, b Wait) int {
	if a.WaitedMs != b.WaitedMs {
		return cmp.Compare(b.WaitedMs, a.WaitedMs)
	}
	if a.Phase != b.Phase {
		return strings.Compare(a.Phase, b.Phase)
	}
	return strings.Compare(a.MemberID, b.MemberID)
}

// diffSets returns the partitions of a that are not in b, by topic.
func diffSets(a, b tpset) []TopicPartitions {
	var out []TopicPartitions
	for _, t := range a.topics() {
		var ps []int32
		for _, p := range a[t] {
			if !b.has(t, p) {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			slices.Sort(ps)
			out = append(out, TopicPartitions{Topic: t, Partitions: ps})
		}
	}
	return out
}

// histOf returns the group's history, creating it.
func (s *Shard) histOf(group string) *ghist {
	h := s.hist[group]
	if h == nil {
		h = &ghist{}
		s.hist[group] = h
	}
	return h
}

// recordEvent numbers ev, tells the observer, and writes it (with the
// tombstone of the event it pushes out); replay adds it to the history once
// durable. It records a classic rebalance that ended Empty or superseded,
// which happened whatever becomes of the write, so the observer is told
// even if the event's own record then fails. (One that ended Stable is
// told once the assignment written with it is durable: rbAssigned.) It is
// told now, unless a write holding an earlier event of the group, told once
// that write's outcome is known, is in flight: an assignment's (w, the
// group's rbWriting), or a consumer group's completing write (the group was
// converted since). It is then held for the newest of those, the last to
// complete, and told after it (rbAssignWritten, tellHeld), so that the
// observer hears a group's events in seq order; if an assignment write
// failed, as the one event this one then is.
func (s *Shard) recordEvent(ev RebalanceEvent, w *rbTracker, out *Output) uint64 {
	if !s.tracks() {
		return 0
	}
	recs := s.historyRecs(&ev)
	h := s.hist[ev.Group]
	var after uint64
	if w != nil {
		after = w.seq
	}
	if len(h.unstored) > 0 {
		after = max(after, s.newestEventInFlight(ev.Group))
	}
	if after != 0 {
		if h.held == nil {
			h.held = map[uint64][]RebalanceEvent{}
		}
		h.held[after] = append(h.held[after], ev)
	} else if s.cfg.OnRebalance != nil {
		s.observe(ev)
	}
	s.storeEvent(ev, recs, out)
	return ev.Seq
}

// newestEventInFlight returns the newest seq of group's events held by a
// consumer group's completing write still in flight (0: none), whose
// outcome tells the events held for it (tellHeld). Not the group's unstored
// seqs alone: a failed write's stay there until the partition reloads
// (eventsUnstored), while the writes after it, still in flight, are served
// and told in the meantime.
func (s *Shard) newestEventInFlight(group string) uint64 {
	var newest uint64
	for _, w := range s.writes {
		if !w.applied {
			continue
		}
		for i := range w.recs {
			if r := &w.recs[i]; r.kind == keyHistory && !r.del && r.ev != nil && r.group == group {
				newest = max(newest, r.ev.Seq)
			}
		}
	}
	return newest
}

// recordEventAt is recordEvent at seq, which a failed assignment write held
// (its rebalance then ended superseded: rbAssignWritten), told now. Later
// events may have taken seqs meanwhile; if they pushed seq out of the
// bound, the event is told and not stored.
func (s *Shard) recordEventAt(ev RebalanceEvent, seq uint64, out *Output) {
	h := s.histOf(ev.Group)
	if seq > h.nextSeq {
		h.nextSeq = seq
	}
	ev.Seq = seq
	if s.cfg.OnRebalance != nil {
		s.observe(ev)
	}
	if !s.inBound(h, seq) {
		return
	}
	s.storeEvent(ev, s.historyRecsAt(h, &ev), out)
}

// storeEvent writes an event recorded (and told) already.
func (s *Shard) storeEvent(ev RebalanceEvent, recs []rec, out *Output) {
	if s.cfg.HistorySize < 0 {
		return // told already; nothing to store
	}
	group := ev.Group
	h := s.hist[group]
	h.writing = append(h.writing, ev.Seq)
	s.write(out, recs, func(now time.Time, code int16, _ *Output) {
		h.writing = slices.DeleteFunc(h.writing, func(seq uint64) bool { return seq == ev.Seq })
		if code != ErrNone {
			s.logWriteFailure(code, "group %q: storing rebalance event %d failed", group, ev.Seq)
			return
		}
		s.evalStorm(group, now)
	})
}

// takeHeld removes and returns the events held for seq's outcome
// (recordEvent).
func (h *ghist) takeHeld(seq uint64) []RebalanceEvent {
	evs := h.held[seq]
	delete(h.held, seq)
	if len(h.held) == 0 {
		h.held = nil // most groups never hold one: no map kept per idle group
	}
	return evs
}

// tellHeld tells the events held for those of recs, a consumer group's
// completing write whose outcome is known (recordEvent): after them if it
// is durable; as they are if it failed (they happened all the same).
func (s *Shard) tellHeld(recs []rec) {
	for i := range recs {
		if r := &recs[i]; r.kind == keyHistory && !r.del && r.ev != nil {
			if h := s.hist[r.group]; h != nil && h.held != nil {
				s.tell(h.takeHeld(r.ev.Seq))
			}
		}
	}
}

// observe tells OnRebalance (set) ev. On a node that keeps no history
// the event goes without its number (Seq 0): the shard numbers a group's
// events for its own bookkeeping (which write holds which), but nothing
// stores the number, so a load of the partition started again from 1 (or
// from the last event stored by a node that kept history), and an observer
// expecting a group's seq to grow, or dropping a (group, seq) it had seen,
// misread the rebalances after a reload.
func (s *Shard) observe(ev RebalanceEvent) {
	if s.cfg.HistorySize < 0 {
		ev.Seq = 0
	}
	s.cfg.OnRebalance(ev)
}

// tell tells the observer evs, in order.
func (s *Shard) tell(evs []RebalanceEvent) {
	if s.cfg.OnRebalance == nil {
		return
	}
	for _, ev := range evs {
		s.observe(ev)
	}
}

// inBound tells whether seq is still among the group's newest HistorySize
// seqs (h.nextSeq the newest).
func (s *Shard) inBound(h *ghist, seq uint64) bool {
	return seq+uint64(s.cfg.HistorySize) > h.nextSeq
}

// rewriteEvent writes ev again at its seq, recorded and told already
// (recordEvent) with other contents: replay replaces the event in the
// history once durable. The observer is not told again (one rebalance), and
// nothing is pushed out of the bound (the first write did that). An event
// that later events have pushed out of the bound meanwhile (a
// --group-history smaller than the events of one write's latency) is not
// written: their tombstones removed it, and the rewrite, written after
// them, put it back in the store, past the bound.
func (s *Shard) rewriteEvent(ev RebalanceEvent, out *Output) {
	if s.cfg.HistorySize < 0 {
		return // never stored
	}
	h := s.histOf(ev.Group)
	if !s.inBound(h, ev.Seq) {
		return
	}
	h.writing = append(h.writing, ev.Seq)
	js := boundStored(&ev, s.historyEventBudget())
	recs := []rec{{kind: keyHistory, group: ev.Group, ev: &ev, evJSON: js}}
	s.write(out, recs, func(now time.Time, code int16, _ *Output) {
		h.writing = slices.DeleteFunc(h.writing, func(seq uint64) bool { return seq == ev.Seq })
		if code != ErrNone {
			s.logWriteFailure(code, "group %q: storing rebalance event %d failed", ev.Group, ev.Seq)
		}
	})
}

// historyRecs numbers ev, bounds it for storage (boundStored), and returns
// the records that store it: the event and the tombstone of the event it
// pushes out. The caller tells the observer (recordEvent, or WriteDone for
// an event written with its rebalance's completion: eventsDurable).
func (s *Shard) historyRecs(ev *RebalanceEvent) []rec {
	h := s.histOf(ev.Group)
	ev.Seq = h.nextSeq + 1
	h.nextSeq = ev.Seq
	return s.historyRecsAt(h, ev)
}

// historyRecsAt is historyRecs for ev numbered already. On a node that
// keeps no history it is one record that only carries ev to the observer
// (rec.told): not bounded, encoded, stored nor kept, and pushing nothing out.
func (s *Shard) historyRecsAt(h *ghist, ev *RebalanceEvent) []rec {
	if s.cfg.HistorySize < 0 {
		return []rec{{kind: keyHistory, group: ev.Group, ev: ev, told: true}}
	}
	js := boundStored(ev, s.historyEventBudget())
	recs := []rec{{kind: keyHistory, group: ev.Group, ev: ev, evJSON: js}}
	old := int64(ev.Seq) - int64(s.cfg.HistorySize)
	if old > 0 {
		recs = append(recs, rec{kind: keyHistory, group: ev.Group, seq: uint64(old), del: true})
	}
	for _, seq := range h.trimmed {
		if int64(seq) != old {
			recs = append(recs, rec{kind: keyHistory, group: ev.Group, seq: seq, del: true})
		}
	}
	return recs
}

// historyTombstones appends the tombstones of a group's stored history.
func (s *Shard) historyTombstones(group string, recs []rec) []rec {
	if h := s.hist[group]; h != nil {
		for _, e := range h.events {
			recs = append(recs, rec{kind: keyHistory, group: group, seq: e.Seq, del: true})
		}
		for _, le := range h.loaded {
			recs = append(recs, rec{kind: keyHistory, group: group, seq: le.seq, del: true})
		}
		for _, seq := range h.trimmed {
			recs = append(recs, rec{kind: keyHistory, group: group, seq: seq, del: true})
		}
		for _, seq := range h.writing {
			recs = append(recs, rec{kind: keyHistory, group: group, seq: seq, del: true})
		}
	}
	return recs
}

// forgetHistory drops the history of a group that is gone from the shard
// once none of its events is kept or being written.
func (s *Shard) forgetHistory(group string) {
	h := s.hist[group]
	if h == nil || s.groups[group] != nil || len(h.events)+len(h.loaded)+len(h.trimmed)+len(h.writing) > 0 {
		return
	}
	if s.cfg.HistorySize < 0 && len(h.held)+len(h.unstored) > 0 {
		return // events still to be told once their writes complete
	}
	s.cancel(h.timer)
	delete(s.hist, group)
	if h.flagged && s.cfg.OnStorm != nil {
		// The group is gone: it no longer storms (metrics count
		// flagged groups from these calls).
		s.cfg.OnStorm(StormStatus{Group: group, Threshold: s.cfg.StormThreshold, WindowMs: s.cfg.StormWindow.Milliseconds()})
	}
}

// groupGone is called once a group is removed from the shard. A node
// without history but with an observer keeps, per group that rebalanced,
// the entry that numbers and holds its events until they are told; no
// history tombstone will drop it (none is written), so it goes with the
// group. Before, it stayed for as long as the partition was served: one
// entry per group id ever rebalanced and deleted (a console consumer's
// random group, every run). With history, the history's tombstones drop it.
func (s *Shard) groupGone(group string) {
	if s.cfg.HistorySize < 0 {
		s.forgetHistory(group)
	}
}

// replayHistory applies a history record.
func (s *Shard) replayHistory(r *rec) {
	if r.told {
		return // history off: told, not kept
	}
	if r.del {
		h := s.hist[r.group]
		if h == nil {
			return
		}
		h.events = slices.DeleteFunc(h.events, func(e RebalanceEvent) bool { return e.Seq == r.seq })
		h.loaded = slices.DeleteFunc(h.loaded, func(e rawEvent) bool { return e.seq == r.seq })
		h.trimmed = slices.DeleteFunc(h.trimmed, func(seq uint64) bool { return seq == r.seq })
		s.forgetHistory(r.group)
		return
	}
	h := s.histOf(r.group)
	seq := r.seq
	if r.ev != nil {
		seq = r.ev.Seq
	}
	if seq > h.nextSeq {
		h.nextSeq = seq
	}
	if r.ev == nil { // loaded: decoded when first read
		h.loaded = append(h.loaded, rawEvent{seq: seq, raw: r.raw})
		h.evictionsStored = true
		return
	}
	s.all(r.group, h)
	ev := *r.ev
	ev.CutCauses = nil // for the observer only: a reloaded event has none
	h.put(ev)
	h.trim(s.cfg.HistorySize)
}

func (r *rec) encodeHistory() Record {
	k := historyKey(r.group, r.seq)
	if r.del {
		return Record{Key: k}
	}
	k = historyKey(r.group, r.ev.Seq)
	b := r.evJSON
	if b == nil {
		var err error
		if b, err = json.Marshal(r.ev); err != nil { // cannot happen: the event holds only plain values
			b = []byte("{}")
		}
	}
	v := make([]byte, 2, 2+s2.MaxEncodedLen(len(b)))
	binary.BigEndian.PutUint16(v, historyValueLatest)
	v = append(v, s2.Encode(v[2:cap(v)], b)...)
	return Record{Key: k, Value: v}
}

func decodeHistory(key, value []byte) (rec, error) {
	kr := reader{b: key[1:]}
	group := kr.string()
	seq := kr.u64()
	if kr.err {
		return rec{}, fmt.Errorf("%w: history key %x", ErrCorruptRecord, key)
	}
	r := rec{kind: keyHistory, group: group, seq: seq, del: value == nil}
	if r.del {
		return r, nil
	}
	if len(value) < 2 {
		return rec{}, fmt.Errorf("%w: history of group %q", ErrCorruptRecord, group)
	}
	r.raw = bytes.Clone(value) // the store may reuse value
	return r, nil
}

// maxDecodedEvent bounds a stored event's decoded JSON: far above what an
// event is stored as (storedEventBytes, plus a group id of 32 KiB escaped).
// An event over it is dropped as corrupt, as one that does not decode.
const maxDecodedEvent = 64 << 20

// decodeEvent decodes the stored event seq of group from its stored value.
func decodeEvent(group string, seq uint64, raw []byte) (*RebalanceEvent, error) {
	body := raw[2:]
	switch v := binary.BigEndian.Uint16(raw); v {
	case historyValueJSON:
	case historyValueS2:
		// The block's header says how long it is decoded, and the
		// decoder allocates that first: a damaged value of a few bytes
		// could claim up to 4 GiB.
		n, err := s2.DecodedLen(body)
		if err == nil && n > maxDecodedEvent {
			return nil, fmt.Errorf("%w: history event %d of group %q: claims %d bytes decoded, more than the %d any event takes",
				ErrCorruptRecord, seq, group, n, maxDecodedEvent)
		}
		if body, err = s2.Decode(nil, body); err != nil {
			return nil, fmt.Errorf("%w: history event %d of group %q: %v", ErrCorruptRecord, seq, group, err)
		}
	default:
		return nil, fmt.Errorf("%w: history event %d of group %q: unknown value version %d", ErrCorruptRecord, seq, group, v)
	}
	var ev RebalanceEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: history event %d of group %q: %v", ErrCorruptRecord, seq, group, err)
	}
	ev.Seq, ev.Group = seq, group
	// An event stored before times were recorded in UTC, or by a node in
	// another zone, carries that node's offset: served in UTC like the rest.
	ev.inUTC()
	return &ev, nil
}

// event is r's event, decoded if it was loaded.
func (r *rec) event() (*RebalanceEvent, error) {
	if r.ev != nil || r.raw == nil {
		return r.ev, nil
	}
	return decodeEvent(r.group, r.seq, r.raw)
}

// storm computes the storm status of a group's history at now: the
// rebalances that started within (now-window, now]; flagged above the
// threshold, since the start of the rebalance that took the count in the
// current window above it.
func (s *Shard) storm(group string, now time.Time) StormStatus {
	st := StormStatus{Group: group, Threshold: s.cfg.StormThreshold, WindowMs: s.cfg.StormWindow.Milliseconds()}
	h := s.hist[group]
	if h == nil || s.cfg.StormThreshold < 0 {
		return st
	}
	from := now.Add(-s.cfg.StormWindow)
	var in []RebalanceEvent
	for _, e := range s.all(group, h) {
		if e.Start.After(from) && !e.Start.After(now) && !slices.Contains(h.unstored, e.Seq) {
			in = append(in, e)
		}
	}
	st.Count = len(in)
	if st.Count > 0 {
		st.Causes, st.StartedBy = map[CauseKind]int{}, map[CauseKind]int{}
		for _, e := range in {
			st.StartedBy[e.Cause.Kind]++
			st.Causes[e.Cause.Kind]++
			for _, c := range e.MoreCauses {
				st.Causes[c.Kind]++
			}
		}
	}
	if st.Count > st.Threshold {
		st.Flagged = true
		since := in[st.Threshold].Start
		st.Since = &since
	}
	return st
}

// evalStorm re-evaluates a group's storm flag at now, tells OnStorm when it
// changes, and arms the timer that unflags it when the window slides.
func (s *Shard) evalStorm(group string, now time.Time) {
	h := s.hist[group]
	if h == nil || s.cfg.StormThreshold < 0 {
		return
	}
	if !h.flagged && len(h.events)+len(h.loaded) <= s.cfg.StormThreshold {
		// Too few events to storm: nothing to tell and no window to watch
		// (and a loaded history stays undecoded).
		s.cancel(h.timer)
		return
	}
	st := s.storm(group, now)
	if st.Flagged != h.flagged {
		h.flagged = st.Flagged
		st.Loaded = st.Flagged && s.stormsAtLoad
		if s.cfg.OnStorm != nil {
			s.cfg.OnStorm(st)
		}
	}
	s.cancel(h.timer)
	if st.Flagged {
		// The count drops to the threshold when the oldest event that
		// keeps it above leaves the window.
		from := now.Add(-s.cfg.StormWindow)
		for _, e := range h.events {
			if e.Start.After(from) && !slices.Contains(h.unstored, e.Seq) {
				if h.timer == nil { // made when first needed: most groups never storm
					h.timer = newTimer(func(now time.Time, out *Output) { s.evalStorm(group, now) })
				}
				s.arm(h.timer, e.Start.Add(s.cfg.StormWindow).Add(time.Millisecond))
				break
			}
		}
	}
}

// waiting is the "now" view of a classic group that is not Stable.
func (g *Group) waiting() *Waiting {
	if g.state != PreparingRebalance && g.state != CompletingRebalance {
		return nil
	}
	w := &Waiting{State: g.state.String(), Since: g.stateTime, Members: []WaitingMember{}}
	rb := g.rb
	if rb == nil {
		rb = g.rbWriting // its assignment is being stored
	}
	if rb != nil {
		w.Since = rb.start
		c := rb.cause
		w.Cause = &c
	}
	for _, m := range g.members {
		wm := WaitingMember{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost, Since: g.stateTime}
		switch g.state {
		case PreparingRebalance:
			if m.join != nil {
				continue
			}
			wm.Phase = "join"
			if g.rb != nil {
				wm.Since = g.rb.phaseStart
			}
			// Its session timer runs on; a dynamic member is also
			// evicted when the join barrier closes without it. The
			// earlier of the two removes it.
			wm.Deadline = deadlineOf(m.session)
			if m.instanceID == "" && !g.initialDelay {
				wm.Deadline = earlier(wm.Deadline, deadlineOf(g.joinTimer))
			}
		case CompletingRebalance:
			if _, ok := g.pendingSync[m.id]; !ok {
				continue
			}
			wm.Phase, wm.Deadline = "sync", deadlineOf(g.syncTimer)
		}
		w.Members = append(w.Members, wm)
	}
	return w
}

// earlier is the earlier of two deadlines (nil: none).
func earlier(a, b *time.Time) *time.Time {
	if a == nil || b != nil && b.Before(*a) {
		return b
	}
	return a
}

// deadlineOf is when t fires, nil when it is not armed.
func deadlineOf(t *timer) *time.Time {
	if !t.armed() {
		return nil
	}
	at := t.at
	return &at
}

// HistoryDoc returns the history document of a group: at most n of its
// latest events (n < 0: all kept), its storm status and, when it is
// rebalancing, what it waits for. ok is false when the shard knows nothing
// of the group.
func (s *Shard) HistoryDoc(group string, n int, now time.Time) (doc *HistoryDoc, ok bool) {
	g := s.groups[group]
	h := s.hist[group]
	if (g == nil || g.state == Dead) && h == nil {
		return nil, false
	}
	doc = &HistoryDoc{Version: HistoryDocVersion, Group: group, Type: "classic", State: Dead.String(), History: []RebalanceEvent{}}
	if g != nil && g.state != Dead {
		doc.State = g.state.String()
		if g.cg != nil {
			doc.Type, doc.State = "consumer", g.cg.state()
			doc.Waiting = g.cWaitingView()
		} else {
			doc.Waiting = g.waiting()
		}
		doc.Waiting.inUTC()
	}
	if h != nil {
		evs := s.all(group, h)
		if n >= 0 && len(evs) > n {
			evs = evs[len(evs)-n:]
		}
		doc.History = append(doc.History, evs...)
	}
	doc.Storm = s.storm(group, now)
	doc.HistoryOff = s.cfg.HistorySize < 0
	return doc, true
}

// History returns the stored events of a group, oldest first (nil: none).
func (s *Shard) History(group string) []RebalanceEvent {
	if h := s.hist[group]; h != nil {
		if evs := s.all(group, h); len(evs) > 0 {
			return slices.Clone(evs)
		}
	}
	return nil
}

// reasonOf returns a client's reason, trimmed to a sane length.
func reasonOf(p *string) string {
	if p == nil {
		return ""
	}
	r := *p
	if len(r) > 512 {
		r = r[:512]
	}
	return strings.ToValidUTF8(r, "?")
}

// eventsDurable tells the observer the rebalance events among recs, the
// records of a write that completes their rebalances (an applied write of
// a consumer group; a classic group's assignment: writeEvents) and is now
// durable, and evaluates their groups' storms, as recordEvent's write does
// for a classic event written alone. A consumer group's event is applied with the write that completes
// its rebalance; if that write fails, the partition reloads from the store,
// where the rebalance is not complete, and the loaded group's event (cause
// loaded) is the one told, once: telling both counted one rebalance twice in
// cohort_rebalances_total, and flagging both one storm twice.
func (s *Shard) eventsDurable(now time.Time, recs []rec) {
	for i := range recs {
		if r := &recs[i]; r.kind == keyHistory && !r.del && r.ev != nil {
			if h := s.hist[r.group]; h != nil {
				h.unstored = slices.DeleteFunc(h.unstored, func(seq uint64) bool { return seq == r.ev.Seq })
			}
			if s.cfg.OnRebalance != nil {
				s.observe(*r.ev)
			}
			if !r.told {
				s.evalStorm(r.group, now)
			}
		}
	}
}

// eventsUnstored notes the rebalance events among recs, the records of an
// applied write just issued (writeApplied), as not stored yet: the storm
// detector counts them once their write is durable (eventsDurable). A
// failed write leaves them noted: the partition reloads without them.
func (s *Shard) eventsUnstored(recs []rec) {
	for i := range recs {
		if r := &recs[i]; r.kind == keyHistory && !r.del && r.ev != nil {
			if h := s.hist[r.group]; h != nil {
				h.unstored = append(h.unstored, r.ev.Seq)
			}
		}
	}
}
