package group

import (
	"slices"
	"time"
)

// lateWrite is a write in flight when the shard was unloaded (the partition
// moved away, or the node is stopping) that holds rebalance events. Unload
// answers its requests NOT_COORDINATOR at once, but the write may still
// reach the store: its outcome, if the runtime still reports it
// (Shard.WriteDone after Unload), is the outcome of its rebalances.
type lateWrite struct {
	recs    []rec // the write's history records (events, tombstones)
	applied bool  // a consumer group's: its events are in the history already
	// tell: its events are told to OnRebalance once durable (a consumer
	// group's, and a classic group's written with its assignment); a
	// classic event written alone was told when recorded.
	tell bool
	// after: the events recorded while the write was in flight, told
	// after its outcome (recordEvent): as they were stored, unless the
	// write failed (lateFailed).
	after []RebalanceEvent
	// rb: a classic assignment write's tracker, as Unload left it (its
	// links to the rebalances around it kept: rbAssignWritten), for what
	// a failure makes of the events held (lateFailed).
	rb *rbTracker
}

// keepLate notes, before Unload gives up on them, the writes in flight that
// hold rebalance events, and returns the histories of their groups: the
// only state an unloaded shard keeps. This node coordinated those
// rebalances and owns their count: the node that loads the partition next
// finds them stored, tells no observer of a stored event, and finds a
// storm they made flagged already (StormStatus.Loaded), so nobody else
// counts them. Before, an event whose write was in flight at the unload was
// never counted anywhere.
func (s *Shard) keepLate(ids []uint64) map[string]*ghist {
	var keep map[string]*ghist
	for _, id := range ids {
		w := s.writes[id]
		var recs []rec
		hasEvent := false
		for i := range w.recs {
			if r := &w.recs[i]; r.kind == keyHistory {
				recs = append(recs, *r)
				hasEvent = hasEvent || !r.del && r.ev != nil
			}
		}
		if !hasEvent {
			continue
		}
		if s.late == nil {
			s.late = map[uint64]lateWrite{}
		}
		lw := lateWrite{recs: recs, applied: w.applied, tell: w.applied || w.rb != nil, rb: w.rb}
		for i := range recs {
			if h := s.hist[recs[i].group]; h != nil && !recs[i].del && recs[i].ev != nil && h.held[recs[i].ev.Seq] != nil {
				lw.after = append(lw.after, h.takeHeld(recs[i].ev.Seq)...)
			}
		}
		s.late[id] = lw
		for i := range recs {
			if h := s.hist[recs[i].group]; h != nil {
				if keep == nil {
					keep = map[string]*ghist{}
				}
				keep[recs[i].group] = h
			}
		}
	}
	for _, h := range keep {
		h.timer = nil // the shard's timers are gone with it
	}
	return keep
}

// LateWrites reports how many writes in flight when the shard was unloaded
// still await their outcome (WriteDone) for the rebalances they hold: the
// runtime keeps an unloaded shard while it has any and reports their
// outcomes to it.
func (s *Shard) LateWrites() int { return len(s.late) }

// lateWriteDone applies the outcome of a write in flight at Unload: a
// durable one's events are told to OnRebalance (but for a classic event
// written alone, told when it was recorded), and its events evaluated by the
// storm detector (evalLateStorm); a failed one's events did not happen.
// Either way, the events recorded while it was in flight are told then.
func (s *Shard) lateWriteDone(now time.Time, id uint64, code int16) {
	lw, ok := s.late[id]
	if !ok {
		return
	}
	delete(s.late, id)
	if code != ErrNone && lw.rb != nil {
		s.lateFailed(&lw)
	}
	for i := range lw.recs {
		r := &lw.recs[i]
		if code == ErrNone && lw.tell && !r.del && r.ev != nil && s.cfg.OnRebalance != nil {
			// Told whatever became of the group's history, as
			// eventsDurable does: the rebalance is stored.
			s.observe(*r.ev)
		}
		h := s.hist[r.group]
		if h == nil {
			continue
		}
		switch {
		case r.del:
			if code == ErrNone && !lw.applied {
				h.events = slices.DeleteFunc(h.events, func(e RebalanceEvent) bool { return e.Seq == r.seq })
				h.loaded = slices.DeleteFunc(h.loaded, func(e rawEvent) bool { return e.seq == r.seq })
			}
			continue
		case r.ev == nil, r.told: // history off: told above, not kept, no storm
			continue
		case code != ErrNone:
			// Not stored: the next load of the partition does not
			// have it either.
			h.events = slices.DeleteFunc(h.events, func(e RebalanceEvent) bool { return e.Seq == r.ev.Seq })
			continue
		case lw.applied:
			h.unstored = slices.DeleteFunc(h.unstored, func(seq uint64) bool { return seq == r.ev.Seq })
		default:
			h.put(*r.ev)
		}
		s.evalLateStorm(r.group, now)
	}
	s.tell(lw.after)
}

// lateFailed applies the failure of lw, a classic assignment write, after
// the unload, as rbAssignWritten does on a loaded shard but for the store
// (no rewrite is written from an unloaded shard): the next rebalance's
// write, if in flight, counts one more failed before it; the held event
// that a later end recorded is told as the one event it then is; or a
// conversion meanwhile ended the rebalance superseded, told first at the
// failed write's seq.
func (s *Shard) lateFailed(lw *lateWrite) {
	rb := lw.rb
	switch {
	case rb.next != nil:
		rb.next.failedRun = rb.failedRun + 1
	case rb.ended != nil && rb.ended.evs[0].Seq == 0: // a conversion
		ev := rb.ended.pick(rb.failedRun)
		ev.Seq = rb.seq
		lw.after = append([]RebalanceEvent{ev}, lw.after...)
	case rb.ended != nil:
		ev := rb.ended.pick(rb.failedRun)
		for i := range lw.after {
			if lw.after[i].Seq == ev.Seq {
				lw.after[i] = ev
			}
		}
	}
}

// evalLateStorm is evalStorm on an unloaded shard: a group that a late
// durable event takes over the threshold is told to OnStorm as flagged,
// with Late set (count it; the group is not served here any more). Nothing
// else is told: a flag found by the partition's next load is not this
// node's to change, and no timer runs.
func (s *Shard) evalLateStorm(group string, now time.Time) {
	h := s.hist[group]
	if h == nil || h.flagged || s.cfg.StormThreshold < 0 || len(h.events)+len(h.loaded) <= s.cfg.StormThreshold {
		return
	}
	if st := s.storm(group, now); st.Flagged {
		h.flagged = true
		st.Late = true
		if s.cfg.OnStorm != nil {
			s.cfg.OnStorm(st)
		}
	}
}
