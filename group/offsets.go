package group

import (
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type topicPartition struct {
	topic     string
	partition int32
}

// inflightCommit is an offset commit being written: its records (which
// replay applies once durable).
type inflightCommit struct {
	seq  uint64
	recs []rec
}

// commitInFlight reports whether a commit of tp is being written. Commits in
// flight per group are few (usually one batch), so a scan beats keeping a
// per-partition counter map on the hot path.
func (g *Group) commitInFlight(tp topicPartition) bool {
	for _, c := range g.inflight {
		for i := range c.recs {
			if c.recs[i].tp == tp {
				return true
			}
		}
	}
	return false
}

// commitWritten forgets the commit seq (written or failed).
func (g *Group) commitWritten(seq uint64) {
	for i, c := range g.inflight {
		if c.seq == seq {
			g.inflight = append(g.inflight[:i], g.inflight[i+1:]...)
			return
		}
	}
}

// offset is one committed offset.
type offset struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64 // commit time, unix milliseconds (what is stored)
	expireMs    int64 // explicit expiry, unix milliseconds; 0 unless set (OffsetCommit v2–4 retention)
}

// OffsetCommit handles an OffsetCommit request (docs/group-semantics.md
// §commit). The response is released once the offsets are durable.
func (s *Shard) OffsetCommit(now time.Time, t Ticket, req *kmsg.OffsetCommitRequest, out *Output) {
	v := req.Version
	if !namesPartitions(req) {
		// Nothing to commit: Kafka's API layer answers without asking its
		// coordinator, so such a request neither creates a group nor
		// keeps a member's session alive, and nor does it here.
		out.reply(t, offsetCommitResponse(req, ErrNone))
		return
	}
	code := s.validateCommit(now, req)
	if code != ErrNone {
		out.reply(t, offsetCommitResponse(req, code))
		return
	}
	g := s.groups[req.Group]
	if g == nil {
		g = s.newGroup(req.Group, now) // "simple" group, no protocol type
	}

	commitMs := now.UnixMilli()
	var expireMs int64
	if v >= 2 && v <= 4 && req.RetentionTimeMillis != -1 {
		expireMs = explicitExpiry(commitMs, req.RetentionTimeMillis)
	}
	n, size := 0, 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
		for _, rp := range rt.Partitions {
			size += offsetRecordSize(g.id, topicPartition{rt.Topic, rp.Partition}, &offset{metadata: strOr(rp.Metadata)})
		}
	}
	c := s.newOffsetCommitCall(req, n, size)
	c.g, c.t = g, t
	resp := c.resp
	recs, enc, buf := c.recs, c.enc, c.buf
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			meta := strOr(rp.Metadata)
			if s.metadataTooLarge(meta) {
				resp.Topics[i].Partitions[j].ErrorCode = ErrOffsetMetadataTooLarge
				continue
			}
			ct := commitMs
			if v == 1 && rp.Timestamp != -1 {
				ct = rp.Timestamp
			}
			epoch := int32(-1)
			if v >= 6 {
				epoch = rp.LeaderEpoch
			}
			r := rec{kind: keyOffset, group: g.id, tp: topicPartition{rt.Topic, rp.Partition},
				off: offset{offset: rp.Offset, leaderEpoch: epoch, metadata: meta, commitMs: ct, expireMs: expireMs}}
			var e Record
			e, buf = appendOffsetRecord(buf, g.id, r.tp, &r.off)
			recs = append(recs, r)
			enc = append(enc, e)
		}
	}
	if len(recs) == 0 {
		out.reply(t, resp)
		return
	}
	g.commitSeq++
	c.seq = g.commitSeq
	g.inflight = append(g.inflight, inflightCommit{c.seq, recs})
	// Once durable, replaying the records set the offsets; then
	// c.written answers.
	s.nextWrite++
	s.writes[s.nextWrite] = pendingWrite{recs: recs, commit: c}
	out.Writes = append(out.Writes, Write{ID: s.nextWrite, Records: enc})
}

// namesPartitions reports whether an OffsetCommit names any partition.
func namesPartitions(req *kmsg.OffsetCommitRequest) bool {
	for _, t := range req.Topics {
		if len(t.Partitions) > 0 {
			return true
		}
	}
	return false
}

// offsetCommitCall is one OffsetCommit waiting for its records to be
// durable: its response and its records, and the write's completion (no
// closure). It answers when the write is done (written); then the shard
// keeps it, records and all, for a later commit (recycleCommit).
type offsetCommitCall struct {
	g    *Group
	t    Ticket
	seq  uint64
	resp *kmsg.OffsetCommitResponse // the client's: never recycled
	recs []rec
	enc  []Record
	buf  []byte
	// one is the oneOffsetCommit this call is part of, if it is.
	one *oneOffsetCommit
}

// oneOffsetCommit is the call of the common commit of one partition with
// the records it needs inline.
type oneOffsetCommit struct {
	offsetCommitCall
	rec    [1]rec
	record [1]Record
	bytes  [oneCommitBytes]byte
}

// oneCommitResp is the response to a one-partition commit in one
// allocation.
type oneCommitResp struct {
	resp  kmsg.OffsetCommitResponse
	topic [1]kmsg.OffsetCommitResponseTopic
	part  [1]kmsg.OffsetCommitResponseTopicPartition
}

// oneCommitBytes is the encoding buffer a one-partition commit carries
// inline (a record of a group id and topic of about 40 bytes each); a
// longer one allocates its own.
const oneCommitBytes = 160

// Bounds of the shard's finished calls kept for later commits: how many
// one-partition calls (under 5 KB in all), how many records all the kept
// calls of several partitions may hold together (about 80 KB: five
// 50-partition calls), and how many bytes their encoding buffers may hold
// (offset metadata makes records up to ~4 KB each, so 256 of them could
// hold a megabyte). A node's 50 shards keep under 7 MB. A commit of
// more than that allocates its own, and its call is not kept.
const (
	freeOneMax     = 8
	freeRecsBudget = 256
	freeBufBudget  = 128 << 10
)

// newOffsetCommitCall returns the call for req, whose n partitions encode
// into size bytes, with its response filled as offsetCommitResponse's (no
// error) and empty record slices of capacity n. It reuses a finished call
// when the shard kept one (recycleCommit): only the response is allocated
// for every commit.
func (s *Shard) newOffsetCommitCall(req *kmsg.OffsetCommitRequest, n, size int) *offsetCommitCall {
	if len(req.Topics) == 1 && len(req.Topics[0].Partitions) == 1 {
		var o *oneOffsetCommit
		if k := len(s.freeOne); k > 0 {
			o = s.freeOne[k-1]
			s.freeOne[k-1] = nil
			s.freeOne = s.freeOne[:k-1]
		} else {
			o = &oneOffsetCommit{}
		}
		r := &oneCommitResp{resp: kmsg.NewOffsetCommitResponse()}
		r.resp.Version = req.Version
		r.resp.Topics = r.topic[:]
		r.topic[0] = kmsg.NewOffsetCommitResponseTopic()
		r.topic[0].Topic = req.Topics[0].Topic
		r.topic[0].Partitions = r.part[:]
		r.part[0] = kmsg.NewOffsetCommitResponseTopicPartition()
		r.part[0].Partition = req.Topics[0].Partitions[0].Partition
		c := &o.offsetCommitCall
		*c = offsetCommitCall{resp: &r.resp, recs: o.rec[:0], enc: o.record[:0], buf: o.bytes[:0], one: o}
		if size > oneCommitBytes {
			c.buf = make([]byte, 0, size)
		}
		return c
	}
	var c *offsetCommitCall
	if k := len(s.freeCommits); k > 0 {
		c = s.freeCommits[k-1]
		s.freeCommits[k-1] = nil
		s.freeCommits = s.freeCommits[:k-1]
		s.freeRecs -= cap(c.recs)
		s.freeBuf -= cap(c.buf)
	} else {
		c = &offsetCommitCall{}
	}
	c.g, c.t, c.seq = nil, 0, 0
	c.resp = offsetCommitResponse(req, ErrNone)
	if cap(c.recs) < n {
		c.recs = make([]rec, 0, n)
	}
	if cap(c.enc) < n {
		c.enc = make([]Record, 0, n)
	}
	if cap(c.buf) < size {
		c.buf = make([]byte, 0, size)
	}
	c.recs, c.enc, c.buf = c.recs[:0], c.enc[:0], c.buf[:0]
	return c
}

// recycleCommit keeps c for a later commit once c is answered: nothing
// refers to it or its records any more. Replay copied the offsets into the
// group's table, written removed the commit from the group's inflight
// list, the response belongs to the client (c drops it), and a store does
// not retain the records it was given once its append returned
// (store.Store), which it had before WriteDone. The old contents are
// overwritten by the next commit that takes c.
func (s *Shard) recycleCommit(c *offsetCommitCall) {
	c.g, c.resp = nil, nil
	switch {
	case c.one != nil:
		if len(s.freeOne) < freeOneMax {
			s.freeOne = append(s.freeOne, c.one)
		}
	case s.freeRecs+cap(c.recs) <= freeRecsBudget && s.freeBuf+cap(c.buf) <= freeBufBudget:
		s.freeCommits = append(s.freeCommits, c)
		s.freeRecs += cap(c.recs)
		s.freeBuf += cap(c.buf)
	}
}

// written answers the commit once its write is done: code is ErrNone when
// it is durable (the records were replayed), else the error every partition
// written gets (those refused before the write keep their own error).
func (c *offsetCommitCall) written(code int16, out *Output) {
	c.g.commitWritten(c.seq)
	if code != ErrNone {
		for i := range c.resp.Topics {
			for j := range c.resp.Topics[i].Partitions {
				if e := &c.resp.Topics[i].Partitions[j].ErrorCode; *e == ErrNone {
					*e = code
				}
			}
		}
	}
	out.reply(c.t, c.resp)
}

// offsetCommitResponse answers every partition of req with code, in
// request order.
func offsetCommitResponse(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	resp.Version = req.Version
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		tr := &resp.Topics[i]
		*tr = kmsg.NewOffsetCommitResponseTopic()
		tr.Topic = rt.Topic
		tr.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			tr.Partitions[j] = kmsg.NewOffsetCommitResponseTopicPartition()
			tr.Partitions[j].Partition, tr.Partitions[j].ErrorCode = rp.Partition, code
		}
	}
	return resp
}

// validateCommit applies the group-level checks of OffsetCommit and re-arms
// the committing member's session.
func (s *Shard) validateCommit(now time.Time, req *kmsg.OffsetCommitRequest) int16 {
	g := s.groups[req.Group]
	instanceID := strOr(req.InstanceID)
	if g == nil {
		if req.Generation < 0 {
			return ErrNone // creates a simple group
		}
		if req.Version >= 9 {
			return ErrGroupIDNotFound
		}
		return ErrIllegalGeneration
	}
	if g.state == Dead {
		return ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return g.validateConsumerCommit(req)
	}
	if req.Generation < 0 && g.state == Empty {
		return ErrNone // admin/standalone commit
	}
	if req.Generation < 0 && req.MemberID == "" && instanceID == "" {
		return ErrUnknownMemberID // anonymous commit to a group with members
	}
	m, code := g.validateMember(req.MemberID, instanceID)
	if code != ErrNone {
		return code
	}
	if req.Generation != g.generation {
		if g.state == PreparingRebalance && m.downgradedFrom != 0 && req.Generation == m.downgradedFrom {
			// Its epoch from before the group turned classic
			// (maybeDowngrade): not committed, and told to rejoin
			// rather than fenced.
			return ErrRebalanceInProgress
		}
		return ErrIllegalGeneration
	}
	if g.state == CompletingRebalance {
		return ErrRebalanceInProgress
	}
	// Stable or PreparingRebalance: a commit keeps the member alive.
	s.arm(m.session, now.Add(m.sessionTimeout))
	return ErrNone
}

// ServeOffsetFetch answers an OffsetFetch (docs/group-semantics.md §fetch).
// Without RequireStable, or when no asked group has a commit being written,
// the answer is OffsetFetch's, at once. With RequireStable and such a
// commit, the answer waits behind it, as Kafka's coordinator makes a stable
// fetch wait for the writes before it: it then shows what those commits
// wrote. The wait is an empty write, which the store completes after every
// write issued before it; if it fails (the store's error, which clients
// retry), so does the fetch, and a commit that failed on its own leaves
// the offset the fetch then shows as it was.
func (s *Shard) ServeOffsetFetch(t Ticket, req *kmsg.OffsetFetchRequest, out *Output) {
	if !req.RequireStable || !s.commitsInFlight(req) {
		out.reply(t, s.OffsetFetch(req))
		return
	}
	s.write(out, nil, func(_ time.Time, code int16, out *Output) {
		if code != ErrNone {
			out.reply(t, offsetFetchError(req, code))
			return
		}
		out.reply(t, s.OffsetFetch(req))
	})
}

// commitsInFlight reports whether a group req asks about has a commit being
// written.
func (s *Shard) commitsInFlight(req *kmsg.OffsetFetchRequest) bool {
	busy := func(id string) bool {
		g := s.groups[id]
		return g != nil && len(g.inflight) > 0
	}
	if req.Version < 8 {
		return busy(req.Group)
	}
	for _, rg := range req.Groups {
		if busy(rg.Group) {
			return true
		}
	}
	return false
}

// OffsetFetch handles an OffsetFetch request for groups of this shard: the
// single group of v0–7, or every entry of Groups for v8+ (the caller splits a
// multi-group request by shard and merges the responses). It answers from
// the durable offsets, whatever RequireStable says: ServeOffsetFetch is
// what makes a stable fetch wait for the commits being written.
func (s *Shard) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Version = req.Version
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			gr := kmsg.NewOffsetFetchResponseGroup()
			gr.Group = rg.Group
			if g := s.groups[rg.Group]; g != nil && g.cg != nil && req.Version >= 9 {
				if code := g.validateConsumerFetch(rg.MemberID, rg.MemberEpoch); code != ErrNone {
					gr.ErrorCode = code
					resp.Groups = append(resp.Groups, gr)
					continue
				}
			}
			var topics map[string][]int32
			all := rg.Topics == nil
			if !all {
				topics = make(map[string][]int32, len(rg.Topics))
			}
			order := make([]string, 0, len(rg.Topics))
			for _, t := range rg.Topics {
				if _, ok := topics[t.Topic]; !ok {
					order = append(order, t.Topic)
				}
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
			s.fetchOffsets(rg.Group, all, order, topics, func(topic string, p int32, o int64, epoch int32, meta string, code int16) {
				if n := len(gr.Topics); n == 0 || gr.Topics[n-1].Topic != topic {
					t := kmsg.NewOffsetFetchResponseGroupTopic()
					t.Topic = topic
					gr.Topics = append(gr.Topics, t)
				}
				pr := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				pr.Partition, pr.Offset, pr.LeaderEpoch, pr.Metadata, pr.ErrorCode = p, o, epoch, &meta, code
				last := &gr.Topics[len(gr.Topics)-1]
				last.Partitions = append(last.Partitions, pr)
			})
			resp.Groups = append(resp.Groups, gr)
		}
		return resp
	}
	all := req.Topics == nil && req.Version >= 2
	topics := make(map[string][]int32, len(req.Topics))
	order := make([]string, 0, len(req.Topics))
	for _, t := range req.Topics {
		if _, ok := topics[t.Topic]; !ok {
			order = append(order, t.Topic)
		}
		topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
	}
	s.fetchOffsets(req.Group, all, order, topics, func(topic string, p int32, o int64, epoch int32, meta string, code int16) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != topic {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = topic
			resp.Topics = append(resp.Topics, t)
		}
		pr := kmsg.NewOffsetFetchResponseTopicPartition()
		pr.Partition, pr.Offset, pr.LeaderEpoch, pr.Metadata, pr.ErrorCode = p, o, epoch, &meta, code
		last := &resp.Topics[len(resp.Topics)-1]
		last.Partitions = append(last.Partitions, pr)
	})
	return resp
}

// fetchOffsets emits the committed offsets asked for, topic by topic: all of
// the group's when all is set, otherwise the listed partitions (-1 for those
// without a commit). Missing groups are not errors.
func (s *Shard) fetchOffsets(group string, all bool, order []string, topics map[string][]int32,
	emit func(topic string, p int32, o int64, epoch int32, meta string, code int16)) {
	// A group being deleted (Dead until its tombstones are durable) still
	// answers its durable offsets: only durable state is visible, and the
	// deletion may yet fail. Once written, the group is gone.
	g := s.groups[group]
	one := func(tp topicPartition) {
		if g != nil {
			if o, ok := g.offsets.get(tp); ok {
				emit(tp.topic, tp.partition, o.offset, o.leaderEpoch, o.metadata, ErrNone)
				return
			}
		}
		emit(tp.topic, tp.partition, -1, -1, "", ErrNone)
	}
	if all {
		if g == nil {
			return
		}
		for _, tp := range g.sortedOffsets() {
			one(tp)
		}
		return
	}
	// The server lists each partition once (its onceEach): Kafka answers
	// every mention, and a request repeating one partition whose commit
	// holds 4 KiB of metadata was answered a thousand times its size.
	for _, topic := range order {
		for _, p := range topics[topic] {
			one(topicPartition{topic, p})
		}
	}
}

func (g *Group) hasOffset(tp topicPartition) bool {
	return g.offsets.has(tp)
}

func (g *Group) sortedOffsets() []topicPartition {
	tps := make([]topicPartition, 0, g.offsets.len())
	g.offsets.each(func(tp topicPartition, _ offset) { tps = append(tps, tp) })
	return tps
}

// OffsetDelete handles an OffsetDelete request (KIP-496,
// docs/group-semantics.md §offset-delete). The response is released once the tombstones are durable.
func (s *Shard) OffsetDelete(now time.Time, t Ticket, req *kmsg.OffsetDeleteRequest, out *Output) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = req.Version
	if req.Group == "" {
		resp.ErrorCode = ErrInvalidGroupID
		out.reply(t, resp)
		return
	}
	g := s.groups[req.Group]
	if g == nil || g.state == Dead {
		resp.ErrorCode = ErrGroupIDNotFound
		out.reply(t, resp)
		return
	}
	if g.state != Empty && g.protocolType != "consumer" {
		resp.ErrorCode = ErrNonEmptyGroup
		out.reply(t, resp)
		return
	}
	var recs []rec
	for _, rt := range req.Topics {
		tr := kmsg.NewOffsetDeleteResponseTopic()
		tr.Topic = rt.Topic
		subscribed := false
		switch {
		case g.cg != nil:
			subscribed = g.cg.protects(rt.Topic, s.cfg.Topics)
		case g.state != Empty:
			subscribed = g.subscribes(rt.Topic)
			if g.subscribed == nil {
				subscribed = true // unknown subscription: everything counts
			}
		}
		for _, rp := range rt.Partitions {
			pr := kmsg.NewOffsetDeleteResponseTopicPartition()
			pr.Partition = rp.Partition
			tp := topicPartition{rt.Topic, rp.Partition}
			switch {
			case subscribed:
				pr.ErrorCode = ErrGroupSubscribedToTopic
			case g.hasOffset(tp) || g.commitInFlight(tp):
				// A commit being written counts (Kafka reads its latest,
				// not yet durable state): it reaches the store before
				// this tombstone, which then removes it.
				recs = append(recs, offsetTombstone(g.id, tp))
			}
			tr.Partitions = append(tr.Partitions, pr)
		}
		resp.Topics = append(resp.Topics, tr)
	}
	if len(recs) == 0 {
		out.reply(t, resp)
		return
	}
	// Once durable, replaying the tombstones removed the offsets.
	s.write(out, recs, func(now time.Time, code int16, out *Output) {
		resp.ErrorCode = code
		out.reply(t, resp)
	})
}

// ExpireOffsets removes offsets past retention and then groups that are Empty
// with no offsets (KIP-211, docs/group-semantics.md §expiry). The coordinator calls it
// periodically (Kafka: every 10 minutes).
func (s *Shard) ExpireOffsets(now time.Time, out *Output) {
	retention := s.cfg.OffsetsRetention
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		if g.state == Dead {
			continue
		}
		var expired []topicPartition
		g.offsets.each(func(tp topicPartition, o offset) {
			if !g.commitInFlight(tp) && g.offsetExpired(tp, &o, now, retention) {
				expired = append(expired, tp)
			}
		})
		removeGroup := g.empty() && len(g.members) == 0 && g.offsets.len() == len(expired) && len(g.inflight) == 0 &&
			!g.keptForFencing(now, retention)
		if len(expired) == 0 && !removeGroup {
			continue
		}
		recs := make([]rec, 0, len(expired)+1)
		for _, tp := range expired {
			recs = append(recs, offsetTombstone(g.id, tp))
		}
		emptySince := g.stateTime
		if removeGroup {
			g.transition(Dead, now)
			// A record on its way to the store would bring the
			// group back at the next load without its tombstone;
			// so would one a lost conversion left there.
			recs = g.ownTombstones(recs, g.persisted || g.metaWrites > 0)
			recs = s.historyTombstones(g.id, recs)
		}
		if len(recs) == 0 { // a never-persisted empty group
			delete(s.groups, g.id)
			s.forgetHistory(g.id) // an entry its events' tombstones emptied
			continue
		}
		// Once durable, replaying the tombstones removed the offsets
		// (and the group, if it had a metadata record).
		s.write(out, recs, func(now time.Time, code int16, out *Output) {
			if code != ErrNone {
				s.logWriteFailure(code, "group %q: expiring offsets failed", g.id)
				if g.state == Dead && s.groups[g.id] == g {
					g.transition(Empty, emptySince) // retention still counts from then
				}
				return
			}
			if g.state == Dead && s.groups[g.id] == g {
				delete(s.groups, g.id) // never stored: no tombstone to replay
				// Its history's tombstones replayed while it was
				// still here (Dead) and could not drop the history.
				s.forgetHistory(g.id)
			}
		})
	}
}

// DeleteTopicOffsets removes every group's committed offsets of the named
// topics, which were deleted from the catalog: Kafka's coordinator removes
// a deleted topic's offsets in every group, whatever the group's state or
// subscription. Offsets being committed count too (their tombstones are
// written after them). A group left without offsets stays; retention
// removes it as it removes any empty group.
func (s *Shard) DeleteTopicOffsets(topics []string, out *Output) {
	if len(topics) == 0 {
		return
	}
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		if g.state == Dead {
			continue
		}
		var tps []topicPartition
		g.offsets.each(func(tp topicPartition, _ offset) {
			if slices.Contains(topics, tp.topic) {
				tps = append(tps, tp)
			}
		})
		var pending map[topicPartition]bool // being committed, no offset yet
		for _, c := range g.inflight {
			for i := range c.recs {
				if tp := c.recs[i].tp; slices.Contains(topics, tp.topic) && !g.hasOffset(tp) && !pending[tp] {
					if pending == nil {
						pending = map[topicPartition]bool{}
					}
					pending[tp] = true
					tps = append(tps, tp)
				}
			}
		}
		if len(tps) == 0 {
			continue
		}
		recs := make([]rec, len(tps))
		for i, tp := range tps {
			recs[i] = offsetTombstone(g.id, tp)
		}
		s.write(out, recs, func(_ time.Time, code int16, _ *Output) {
			if code != ErrNone {
				s.logWriteFailure(code, "group %q: removing the offsets of deleted topics failed", g.id)
			}
		})
	}
}

// metadataTooLarge reports whether a committed offset's metadata is over
// OffsetMetadataMaxBytes, counted in UTF-16 code units as Kafka counts a
// Java string's length.
func (s *Shard) metadataTooLarge(meta string) bool {
	return len(meta) > s.cfg.OffsetMetadataMaxBytes && utf16Len(meta) > s.cfg.OffsetMetadataMaxBytes
}

// utf16Len is the length of s in UTF-16 code units, the length Kafka
// measures offset metadata in (never more than len(s), its bytes).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++ // a surrogate pair
		}
	}
	return n
}

// explicitExpiry is the expiry time, in unix milliseconds, of an offset
// committed at commitMs with an explicit retention time (OffsetCommit v2–v4).
// A retention too long to add saturates: the offset never expires by its own
// time (Kafka adds without a check, and the wrapped sum expires the offset at
// the next sweep, the opposite of what the client asked). A negative one other
// than -1 expires it at the next sweep, as in Kafka. Never 0, which means no
// explicit expiry.
func explicitExpiry(commitMs, retentionMs int64) int64 {
	if retentionMs > 0 && commitMs > math.MaxInt64-retentionMs {
		return math.MaxInt64
	}
	if e := commitMs + retentionMs; e != 0 {
		return e
	}
	return -1
}

// offsetExpired reports whether the offset of tp has expired: the group's
// state decides whether it can expire at all and from when retention counts;
// an explicit expiry time (OffsetCommit v2–v4) replaces only the count, as in
// Kafka, so it never expires a subscribed topic's offset or one of a group
// that is rebalancing.
// fencingProtocolTypes are the protocol types of cohort's recipes (packages
// election and workers), whose generation is the fencing token their users'
// resources keep.
var fencingProtocolTypes = map[string]bool{"election": true, "workers": true}

// keptForFencing reports whether g, Empty and without offsets, stays until
// retention has passed since it emptied instead of going at the next check,
// as a group with committed offsets would: a recipe's group. Removed, its
// id would start again at generation 1 with the next member, below the
// tokens its resources have recorded, which would refuse every writer from
// then on (Kafka removes such a group at once; cohort's recipes commit no
// offsets to keep it).
func (g *Group) keptForFencing(now time.Time, retention time.Duration) bool {
	if g.cg != nil || !fencingProtocolTypes[g.protocolType] || g.stateTime.IsZero() || retention <= 0 {
		return false
	}
	return now.Sub(g.stateTime) < retention
}

func (g *Group) offsetExpired(tp topicPartition, o *offset, now time.Time, retention time.Duration) bool {
	commitTime := time.UnixMilli(o.commitMs)
	var base time.Time
	switch {
	case g.cg != nil:
		// A consumer-protocol group: whatever its state, offsets of
		// topics no member subscribes to expire after retention.
		if g.cg.protects(tp.topic, g.s.cfg.Topics) {
			return false
		}
		base = commitTime
	case g.state == Empty && g.protocolType != "":
		base = g.stateTime // retention counts from when the group emptied
		if base.IsZero() {
			base = commitTime
		}
	case g.protocolType == "":
		base = commitTime // simple (standalone) group
	case g.protocolType == "consumer" && g.state == Stable && g.subscribed != nil:
		if g.subscribes(tp.topic) {
			return false
		}
		base = commitTime
	default:
		return false
	}
	if o.expireMs != 0 {
		return now.UnixMilli() >= o.expireMs
	}
	return !now.Before(base.Add(retention))
}
