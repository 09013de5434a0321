package group

// A group changes protocol in a write of its own, which the shard applies at
// once: an empty consumer group joined by a classic member (JoinGroup), or a
// consumer group whose last consumer-protocol member left (maybeDowngrade),
// tombstones its consumer group record (keyCGroup) and target metadata
// (keyCTMeta); a classic group upgraded to the consumer protocol, or an
// empty one replaced by a consumer group (ConsumerGroupHeartbeat), has its
// classic record (keyGroup) tombstoned in the write that creates the
// consumer group. The records of the new protocol then come in later
// writes: the classic group's record (the downgrade's comes in the same
// call, just before), or the consumer group's next epoch. Each write has
// its own outcome, and the partition reloads only once its writes in flight
// are done: a later write could be stored while the one that changed the
// protocol was not, leaving both of the group's own records in the store,
// and the load made whichever it read last.
//
// Invariant: a write that stores one of a group's own records (its classic
// record, or its consumer group record) while a write tombstoning the other
// is in flight (or not yet issued, or failed: the shard then reloads once
// its writes are done) carries that tombstone too, ahead of its own records
// and not replayed (the shard has applied it already). So any subset of the
// writes stored in order leaves at most one of the two records: the one of
// the last stored write that holds either. A write that itself tombstones
// the consumer group record (it ends the consumer group) carries nothing.
// A write that deletes the group (DeleteGroups, retention: ownTombstones)
// carries the tombstone of the record the conversion deletes too, in either
// direction: it stores neither record, and a group removed must not come
// back from a lost conversion at the reload.
// Members' records a failed write left behind without their consumer group
// record are dropped at load (dropOrphanConsumerRecords). When no write
// changing a group's protocol is in flight (the common case), a write holds
// only its own records.

// ending counts a group's applied writes in flight (or failed) that
// tombstone its consumer group record (consumer) or its classic record
// (classic).
type ending struct{ consumer, classic int }

// noteEnding registers an applied write of recs: it returns the group whose
// own record the write tombstones ("" if none; a write changes the protocol
// of one group at most) and which, counted in s.ending until the write is
// durable, and the tombstone a consumer group record of recs must carry
// (see above).
func (s *Shard) noteEnding(recs []rec) (group string, ends ending, pre []rec) {
	cgRec := -1
	for i := range recs {
		r := &recs[i]
		switch {
		case r.kind == keyCGroup && r.del:
			group, ends.consumer = r.group, 1
		case r.kind == keyGroup && r.del:
			group, ends.classic = r.group, 1
		case r.kind == keyCGroup && cgRec < 0:
			cgRec = i
		}
	}
	if cgRec >= 0 && ends == (ending{}) && s.ending[recs[cgRec].group].classic > 0 {
		pre = []rec{groupTombstone(recs[cgRec].group)}
	}
	if group != "" {
		s.addEnding(group, ends)
	}
	return group, ends, pre
}

// addEnding adds d to the counts of group id.
func (s *Shard) addEnding(id string, d ending) {
	if s.ending == nil {
		s.ending = map[string]ending{}
	}
	e := s.ending[id]
	e.consumer += d.consumer
	e.classic += d.classic
	if e == (ending{}) {
		delete(s.ending, id)
		return
	}
	s.ending[id] = e
}

// endingConsumer returns the tombstones a classic record of group id must
// carry (see above): nil unless a write ending its consumer group is in
// flight.
func (s *Shard) endingConsumer(id string) []rec {
	if s.ending[id].consumer == 0 {
		return nil
	}
	return []rec{cTombstone(keyCTMeta, id, ""), cTombstone(keyCGroup, id, "")}
}
