package group

// A group changes protocol in a write of its own: an empty consumer group
// joined by a classic member (JoinGroup), or a consumer group whose last
// consumer-protocol member left (maybeDowngrade), tombstones its consumer
// group record (keyCGroup) and target metadata (keyCTMeta) in a write the
// shard applies at once. The classic group's record (keyGroup) comes in a
// later write (the downgrade's comes in the same call, just before). Each
// write has its own outcome, and the partition reloads only once its writes
// in flight are done: the classic record could be stored while the write
// that ended the consumer group was not, leaving both of the group's own
// records in the store, and the load made whichever it read last.
//
// Invariant: every write of a group's classic record issued while a write
// that tombstones its consumer group record is in flight (or not yet issued,
// or failed: the shard then reloads once its writes are done) carries those
// tombstones too, ahead of its own records and not replayed (the shard has
// applied them already). So any subset of the writes stored in order leaves
// at most one of the two records: the classic record wherever it was stored
// after the conversion, the consumer group's records otherwise. Members'
// records a failed write left behind without their group are dropped at load
// (dropOrphanConsumerRecords). When no such write is in flight (the common
// case) a classic record is written alone.

// noteEnding returns the group whose consumer group record recs tombstone
// ("" if none), counting the write in cgEnding.
func (s *Shard) noteEnding(recs []rec) string {
	for i := range recs {
		if r := &recs[i]; r.del && r.kind == keyCGroup {
			if s.cgEnding == nil {
				s.cgEnding = map[string]int{}
			}
			s.cgEnding[r.group]++
			return r.group
		}
	}
	return ""
}

// consumerEnded uncounts a durable write that tombstoned the consumer group
// record of group id. A failed one stays counted: the shard goes on
// showing the group classic until it is reloaded, and what it writes
// meanwhile must still win over the consumer group record the store kept.
func (s *Shard) consumerEnded(id string) {
	if s.cgEnding[id]--; s.cgEnding[id] <= 0 {
		delete(s.cgEnding, id)
	}
}

// endingConsumer returns the tombstones a classic record of group id must
// carry (see above): nil unless a write ending its consumer group is in
// flight.
func (s *Shard) endingConsumer(id string) []rec {
	if s.cgEnding[id] == 0 {
		return nil
	}
	return []rec{cTombstone(keyCTMeta, id, ""), cTombstone(keyCGroup, id, "")}
}
