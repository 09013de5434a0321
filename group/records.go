package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record encoding (version 0). Keys:
//
//	group metadata: 0x01, group id bytes
//	offset:         0x02, uvarint len + group id, uvarint len + topic, int32 partition (big endian)
//
// Values start with a uint16 version. Later versions only append fields, and
// readers ignore bytes they do not know, so an older cohort can read a newer
// record's known prefix. A loader skips keys of unknown kinds. Strings and
// byte slices are uvarint-length-prefixed; integers are big endian.
//
//	group value v0: protocolType, generation int32, protocol, leader,
//	  stateTime int64 (unix ms), uvarint member count, then per member:
//	  id, instanceID, clientID, clientHost, session int32 ms, rebalance int32 ms,
//	  metadata (of the selected protocol), assignment; then, only when a
//	  flag is set, one flags byte: 0x01 a rebalance is pending (the record
//	  of a group just converted from the consumer protocol), which the load
//	  starts again
//	offset value v0: offset int64, leaderEpoch int32, metadata, commitTime int64
//	  (unix ms), expireTime int64 (unix ms, 0 = none)
const (
	keyGroup  byte = 0x01
	keyOffset byte = 0x02

	groupValueVersion  uint16 = 0
	offsetValueVersion uint16 = 0
)

func groupKey(id string) []byte {
	k := make([]byte, 0, 1+len(id))
	k = append(k, keyGroup)
	return append(k, id...)
}

func offsetKey(group string, tp topicPartition) []byte {
	k := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(group)+len(tp.topic)+4)
	k = append(k, keyOffset)
	k = appendString(k, group)
	k = appendString(k, tp.topic)
	return binary.BigEndian.AppendUint32(k, uint32(tp.partition))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// offsetRecordSize bounds the bytes appendOffsetRecord appends.
func offsetRecordSize(group string, tp topicPartition, o *offset) int {
	return 1 + 3*binary.MaxVarintLen64 + len(group) + len(tp.topic) + len(o.metadata) + 4 + 2 + 8 + 4 + 8 + 8
}

// appendOffsetRecord encodes the offset record at the end of buf and
// returns it with the grown buf: the records of one commit share one
// allocation (their key and value slices are capped, so they never overlap).
func appendOffsetRecord(buf []byte, group string, tp topicPartition, o *offset) (Record, []byte) {
	start := len(buf)
	buf = append(buf, keyOffset)
	buf = appendString(buf, group)
	buf = appendString(buf, tp.topic)
	buf = binary.BigEndian.AppendUint32(buf, uint32(tp.partition))
	mid := len(buf)
	buf = binary.BigEndian.AppendUint16(buf, offsetValueVersion)
	buf = binary.BigEndian.AppendUint64(buf, uint64(o.offset))
	buf = binary.BigEndian.AppendUint32(buf, uint32(o.leaderEpoch))
	buf = appendString(buf, o.metadata)
	buf = binary.BigEndian.AppendUint64(buf, uint64(o.commitMs))
	buf = binary.BigEndian.AppendUint64(buf, uint64(o.expireMs))
	end := len(buf)
	return Record{Key: buf[start:mid:mid], Value: buf[mid:end:end]}, buf
}

// rec is one record in the shard's own terms. Handlers emit recs (encoded
// for the store by encode); replay applies them, once the write that carries
// them is durable and, decoded from the store (decode), when a partition
// loads. Both paths go through replay, so the state a write leaves behind
// and the state a reload rebuilds cannot drift apart; the simulation checks
// it by reloading shards from their stored records.
type rec struct {
	kind  byte // keyGroup or keyOffset
	group string
	del   bool            // a tombstone: the key is deleted
	tp    topicPartition  // keyOffset
	off   offset          // keyOffset value
	img   *groupImage     // keyGroup value
	c     *crec           // consumer-group records (crecords.go)
	ev    *RebalanceEvent // keyHistory value (historyrec.go)
	seq   uint64          // keyHistory: the event's number
	// raw is a loaded keyHistory value not decoded yet (historyrec.go:
	// history is decoded when first read, not at load).
	raw []byte
	// evJSON is ev's JSON as boundStored made it (historyRecs), so that
	// the event is encoded once.
	evJSON []byte
	// told: a keyHistory event of a node that keeps no history
	// (Config.HistorySize < 0) but has an observer: it rides its write to
	// be told to OnRebalance when the write is durable, as a stored
	// event is, but is neither stored (encodeWith) nor kept (replay).
	told bool
}

// isConsumer reports whether the record belongs to a consumer-protocol group.
func (r *rec) isConsumer() bool {
	switch r.kind {
	case keyCGroup, keyCMember, keyCTMeta, keyCTarget, keyCCurrent:
		return true
	}
	return false
}

// groupImage is the stored form of a group: its generation and its members
// with their assignments.
type groupImage struct {
	protocolType string
	generation   int32
	protocol     string
	leader       string
	stateTime    time.Time
	members      []memberImage
	// rebalance: the group was to rebalance when this was written
	// (maybeDowngrade); a load prepares that rebalance again.
	rebalance bool
}

// imageRebalancePending is the flags byte's bit for groupImage.rebalance.
const imageRebalancePending byte = 0x01

type memberImage struct {
	id, instanceID, clientID, clientHost string
	session, rebalance                   time.Duration
	metadata, assignment                 []byte // of the selected protocol
}

// image returns the group as stored, with each member's assignment taken
// from assignment(m).
func (g *Group) image(assignment func(*member) []byte) *groupImage {
	img := &groupImage{protocolType: g.protocolType, generation: g.generation, protocol: g.protocol,
		leader: g.leader, stateTime: g.stateTime, members: make([]memberImage, len(g.members))}
	for i, m := range g.members {
		img.members[i] = memberImage{id: m.id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			session: m.sessionTimeout, rebalance: m.rebalanceTimeout,
			metadata: m.metadataFor(g.protocol), assignment: assignment(m)}
	}
	return img
}

// groupRec returns the group metadata record of img.
func (g *Group) groupRec(img *groupImage) rec { return rec{kind: keyGroup, group: g.id, img: img} }

// groupTombstone and offsetTombstone delete a group's metadata record and
// one of its offsets.
func groupTombstone(group string) rec { return rec{kind: keyGroup, group: group, del: true} }

func offsetTombstone(group string, tp topicPartition) rec {
	return rec{kind: keyOffset, group: group, tp: tp, del: true}
}

// encode returns r's stored form.
func (r *rec) encode() Record {
	if r.isConsumer() {
		return r.encodeConsumer()
	}
	switch r.kind {
	case keyHistory:
		return r.encodeHistory()
	case keyGroup:
		if r.del {
			return Record{Key: groupKey(r.group)}
		}
		return Record{Key: groupKey(r.group), Value: encodeGroupImage(r.img)}
	default:
		if r.del {
			return Record{Key: offsetKey(r.group, r.tp)}
		}
		rec, _ := appendOffsetRecord(nil, r.group, r.tp, &r.off)
		return rec
	}
}

func encodeGroupImage(img *groupImage) []byte {
	v := make([]byte, 0, 64+len(img.members)*96)
	v = binary.BigEndian.AppendUint16(v, groupValueVersion)
	v = appendString(v, img.protocolType)
	v = binary.BigEndian.AppendUint32(v, uint32(img.generation))
	v = appendString(v, img.protocol)
	v = appendString(v, img.leader)
	v = binary.BigEndian.AppendUint64(v, uint64(img.stateTime.UnixMilli()))
	v = binary.AppendUvarint(v, uint64(len(img.members)))
	for i := range img.members {
		m := &img.members[i]
		v = appendString(v, m.id)
		v = appendString(v, m.instanceID)
		v = appendString(v, m.clientID)
		v = appendString(v, m.clientHost)
		v = binary.BigEndian.AppendUint32(v, uint32(m.session.Milliseconds()))
		v = binary.BigEndian.AppendUint32(v, uint32(m.rebalance.Milliseconds()))
		v = appendBytes(v, m.metadata)
		v = appendBytes(v, m.assignment)
	}
	if img.rebalance {
		v = append(v, imageRebalancePending)
	}
	return v
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// persistMetadata writes the group's current metadata and assignments.
func (g *Group) persistMetadata(now time.Time, out *Output, done func(time.Time, int16, *Output)) {
	g.writeMetadata(now, out, g.image(func(m *member) []byte { return m.assignment }), done)
}

// writeMetadata writes img as the group's metadata record, counting the
// write in metaWrites until it is done (durable or failed). A record larger
// than the store takes (Config.MaxRecordBytes) is not written: done gets
// UNKNOWN_SERVER_ERROR at once, as Kafka answers a group whose metadata is
// too large for its log, instead of a retriable error the clients would
// retry for ever.
func (g *Group) writeMetadata(now time.Time, out *Output, img *groupImage, done func(time.Time, int16, *Output)) {
	g.writeMetadataWith(now, out, img, nil, nil, done)
}

// writeMetadataWith is writeMetadata with a rebalance's history records in
// the same write (rbAssigned, and rb its tracker): they are replayed, and their event told to
// OnRebalance, once the write is durable (Shard.writeEvents).
func (g *Group) writeMetadataWith(now time.Time, out *Output, img *groupImage, hrecs []rec, rb *rbTracker, done func(time.Time, int16, *Output)) {
	if most := g.s.cfg.MaxRecordBytes; most > 0 {
		r := g.groupRec(img)
		if e := r.encode(); len(e.Key)+len(e.Value) > most {
			g.s.logRefusal(now, "group %q: its metadata record of %d bytes (%d members) is larger than the store takes (%d); not written",
				g.id, len(e.Key)+len(e.Value), len(img.members), most)
			if done != nil {
				done(now, ErrUnknownServer, out)
			}
			return
		}
	}
	g.metaWrites++
	recs := append([]rec{g.groupRec(img)}, hrecs...)
	pre := g.s.endingConsumer(g.id)
	written := func(now time.Time, code int16, out *Output) {
		g.metaWrites--
		if done != nil {
			done(now, code, out)
		}
	}
	if len(hrecs) > 0 {
		g.s.writeEvents(out, pre, recs, rb, written)
		return
	}
	g.s.writeWith(out, pre, recs, written)
}

// ErrCorruptRecord reports a stored record that cannot be decoded.
var ErrCorruptRecord = errors.New("group: corrupt record")

type reader struct {
	b   []byte
	err bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err || n > uint64(len(r.b)) {
		r.err = true
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) string() string { return string(r.bytes()) }

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.err = true
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.err = true
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.err = true
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// Load feeds one stored record into the shard while its partition loads
// (decode, then replay). Records may come in any order; only live keys (no
// tombstones) are expected. Keys of unknown kinds are skipped. Call
// FinishLoad when all are in.
func (s *Shard) Load(key, value []byte) error {
	if len(key) > 0 && key[0] == keyOffset && value != nil {
		return s.loadOffset(key, value)
	}
	s.flushLoadedOffsets()
	r, ok, err := decode(key, value)
	if err != nil || !ok {
		return err
	}
	if !r.del && (r.kind == keyCGroup || r.kind == keyGroup) {
		ld := &s.loading
		if ld.kinds == nil {
			ld.kinds = map[string]loadedKinds{}
		}
		k := ld.kinds[r.group]
		if r.kind == keyCGroup {
			k.cgroup = true
		} else {
			k.classic, k.protocolType = true, r.img.protocolType
		}
		ld.kinds[r.group] = k
	}
	s.replay(&r, true)
	return nil
}

// loadedKinds notes, while a partition loads, which of a group's own
// records were read: its consumer group's (keyCGroup), and its classic
// group's with the protocol type that record gives (keyGroup).
type loadedKinds struct {
	cgroup, classic bool
	protocolType    string
}

// dropOrphanConsumerRecords removes, at the end of a load, the consumer
// groups that member records made without their group's own record
// (keyCGroup): every write that ends a consumer group tombstones that
// record and its target metadata, relying on the writes before it for its
// members' records. When one of those failed and the later write was
// stored (the partition reloads only once its writes in flight are done),
// the members' records stayed behind: loaded, they made a consumer group
// out of nothing, on top of the classic group the store holds or in the
// place of a group it no longer does, and which one depended on the order
// the records came in. The group is left as its other records say (its
// classic record, its offsets), and the stray records are tombstoned.
func (s *Shard) dropOrphanConsumerRecords(kinds map[string]loadedKinds, out *Output) {
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		if g.cg == nil || kinds[id].cgroup {
			continue
		}
		cg := g.cg
		recs := []rec{cTombstone(keyCTMeta, id, "")}
		for _, mid := range slices.Sorted(maps.Keys(cg.members)) {
			recs = append(recs, cTombstone(keyCMember, id, mid), cTombstone(keyCTarget, id, mid), cTombstone(keyCCurrent, id, mid))
		}
		for _, mid := range slices.Sorted(maps.Keys(cg.target)) {
			if cg.members[mid] == nil {
				recs = append(recs, cTombstone(keyCTarget, id, mid))
			}
		}
		g.cg = nil
		g.protocolType = ""
		if k := kinds[id]; k.classic {
			g.protocolType = k.protocolType
		} else if len(g.members) == 0 && len(g.offsets) == 0 {
			delete(s.groups, id)
		}
		s.logf("group %q: %d consumer-protocol members stored without their consumer group (left by a write that failed "+
			"before a later one was stored): dropped", id, len(cg.members))
		s.write(out, recs, func(_ time.Time, code int16, _ *Output) {
			s.logWriteFailure(code, "group %q: deleting consumer-protocol records left without their group failed", id)
		})
	}
}

// loading holds what Load keeps between records: the committed offsets of
// the group being read, so that its offsetTable's slices are made once at
// their final size (growing the map it replaced an insert at a time was a
// sixth of a load's CPU), and the last topic name read, which
// the next offset keys almost always repeat. The store hands out a
// partition's records in key order, so a group's offsets arrive one after
// another; any other record (or FinishLoad) applies the held ones first,
// which keeps the order of every record as read.
type loading struct {
	group string
	offs  []loadedOffset
	topic string
	kinds map[string]loadedKinds // groups' own records read (dropOrphanConsumerRecords)
}

type loadedOffset struct {
	tp  topicPartition
	off offset
}

// loadOffset is Load for a stored offset (not a tombstone): it decodes the
// key without copying the group id or a repeated topic name, and holds the
// offset until the group's last one is read.
func (s *Shard) loadOffset(key, value []byte) error {
	kr := reader{b: key[1:]}
	group, topic := kr.bytes(), kr.bytes()
	p := int32(kr.u32())
	if kr.err {
		return fmt.Errorf("%w: offset key %x", ErrCorruptRecord, key)
	}
	ld := &s.loading
	if string(group) != ld.group || len(ld.offs) == 0 {
		s.flushLoadedOffsets()
		ld.group = string(group)
	}
	if string(topic) != ld.topic {
		ld.topic = string(topic)
	}
	var o offset
	vr := reader{b: value}
	_ = vr.u16() // version: every version starts with the v0 fields
	o.offset = int64(vr.u64())
	o.leaderEpoch = int32(vr.u32())
	o.metadata = vr.string()
	o.commitMs = int64(vr.u64())
	o.expireMs = int64(vr.u64())
	if vr.err {
		return fmt.Errorf("%w: offset of group %q %s/%d", ErrCorruptRecord, ld.group, ld.topic, p)
	}
	ld.offs = append(ld.offs, loadedOffset{tp: topicPartition{ld.topic, p}, off: o})
	return nil
}

// flushLoadedOffsets applies the offsets loadOffset holds.
func (s *Shard) flushLoadedOffsets() {
	ld := &s.loading
	if len(ld.offs) == 0 {
		return
	}
	g := s.groups[ld.group]
	if g == nil {
		g = s.newGroup(ld.group, time.Time{})
	}
	g.offsets.merge(ld.offs)
	clear(ld.offs) // drop the strings
	ld.offs = ld.offs[:0]
}

// decode returns the record stored under key; ok is false for keys of kinds
// this version does not know (skipped, so that an older cohort can read a
// newer store). A nil value is a tombstone.
func decode(key, value []byte) (r rec, ok bool, err error) {
	if len(key) == 0 {
		return rec{}, false, fmt.Errorf("%w: empty key", ErrCorruptRecord)
	}
	switch key[0] {
	case keyCGroup, keyCMember, keyCTMeta, keyCTarget, keyCCurrent:
		r, err = decodeConsumer(key, value)
		return r, err == nil, err
	case keyHistory:
		r, err = decodeHistory(key, value)
		return r, err == nil, err
	case keyGroup:
		r = rec{kind: keyGroup, group: string(key[1:]), del: value == nil}
		if !r.del {
			if r.img, err = decodeGroupImage(value); err != nil {
				return rec{}, false, fmt.Errorf("%w: group %q", err, r.group)
			}
		}
		return r, true, nil
	case keyOffset:
		kr := reader{b: key[1:]}
		group, topic := kr.string(), kr.string()
		p := int32(kr.u32())
		if kr.err {
			return rec{}, false, fmt.Errorf("%w: offset key %x", ErrCorruptRecord, key)
		}
		r = rec{kind: keyOffset, group: group, tp: topicPartition{topic, p}, del: value == nil}
		if r.del {
			return r, true, nil
		}
		vr := reader{b: value}
		_ = vr.u16() // version: every version starts with the v0 fields
		r.off.offset = int64(vr.u64())
		r.off.leaderEpoch = int32(vr.u32())
		r.off.metadata = vr.string()
		r.off.commitMs = int64(vr.u64())
		r.off.expireMs = int64(vr.u64())
		if vr.err {
			return rec{}, false, fmt.Errorf("%w: offset of group %q %s/%d", ErrCorruptRecord, group, topic, p)
		}
		return r, true, nil
	}
	return rec{}, false, nil
}

// minMemberImageBytes is the least a member of a stored group image takes:
// four empty strings, two uint32 timeouts, empty metadata and assignment.
const minMemberImageBytes = 4 + 4 + 4 + 2

func decodeGroupImage(value []byte) (*groupImage, error) {
	// The image's strings and byte slices are cut from two copies made at
	// their exact sizes (the store may reuse value), instead of one
	// allocation each: a loaded group of three members made twenty-odd,
	// at every group of a partition's load.
	var (
		fields [4]stringField // protocol type, protocol, leader: 3 of 4
		strLen int
		binLen int
	)
	r := reader{b: value}
	_ = r.u16()
	field := func(f *stringField) {
		f.b = r.bytes()
		strLen += len(f.b)
	}
	img := &groupImage{}
	field(&fields[0])
	img.generation = int32(r.u32())
	field(&fields[1])
	field(&fields[2])
	img.stateTime = time.UnixMilli(int64(r.u64()))
	n := r.uvarint()
	// Checked against the least a member takes before room is made for
	// n: a damaged count must not cost more than the value could hold.
	if r.err || n > uint64(len(r.b))/minMemberImageBytes {
		return nil, ErrCorruptRecord
	}
	img.members = make([]memberImage, n)
	mfields := make([]stringField, 4*n)
	for i := range img.members {
		m := &img.members[i]
		for j := range 4 { // id, instance id, client id, client host
			field(&mfields[4*i+j])
		}
		m.session = time.Duration(r.u32()) * time.Millisecond
		m.rebalance = time.Duration(int32(r.u32())) * time.Millisecond
		m.metadata = r.bytes()
		m.assignment = r.bytes()
		binLen += len(m.metadata) + len(m.assignment)
		if r.err {
			return nil, fmt.Errorf("%w: member %d", ErrCorruptRecord, i)
		}
	}
	if len(r.b) > 0 { // a later field; the bits this cohort does not know are ignored
		img.rebalance = r.b[0]&imageRebalancePending != 0
	}
	var sb strings.Builder
	sb.Grow(strLen)
	for _, fs := range [][]stringField{fields[:3], mfields} {
		for i := range fs {
			fs[i].at = sb.Len()
			sb.Write(fs[i].b)
		}
	}
	str := sb.String()
	cut := func(f *stringField) string { return str[f.at : f.at+len(f.b)] }
	img.protocolType, img.protocol, img.leader = cut(&fields[0]), cut(&fields[1]), cut(&fields[2])
	bin := make([]byte, 0, binLen)
	clone := func(b []byte) []byte {
		if len(b) == 0 {
			return nil // as a copy of nothing always was
		}
		at := len(bin)
		bin = append(bin, b...)
		return bin[at:len(bin):len(bin)]
	}
	for i := range img.members {
		m := &img.members[i]
		f := mfields[4*i : 4*i+4]
		m.id, m.instanceID, m.clientID, m.clientHost = cut(&f[0]), cut(&f[1]), cut(&f[2]), cut(&f[3])
		m.metadata, m.assignment = clone(m.metadata), clone(m.assignment)
	}
	return img, nil
}

// stringField is a string of a stored group image, while it is decoded: its
// bytes in the value, then its place in the image's one string.
type stringField struct {
	b  []byte
	at int
}

// replay applies one record to the shard: after the write carrying it is
// durable (load false) and while the partition loads (load true).
//
// Offsets and tombstones apply the same way on both paths. A group metadata
// record is a snapshot of the group when it was written: while loading it
// rebuilds the group's members; on a live group, whose membership the
// handlers keep and may have changed since the write was issued, it marks
// the group as stored and, if the group is still completing the rebalance of
// that generation, gives the members their assignments (the leader's
// SyncGroup), which are never handed out before they are durable.
func (s *Shard) replay(r *rec, load bool) {
	if r.isConsumer() {
		s.replayConsumer(r)
		return
	}
	if r.kind == keyHistory {
		s.replayHistory(r)
		return
	}
	g := s.groups[r.group]
	switch {
	case r.kind == keyOffset && r.del:
		if g != nil {
			g.offsets.drop(r.tp)
		}
	case r.kind == keyOffset:
		if g == nil {
			g = s.newGroup(r.group, time.Time{})
		}
		g.offsets.put(r.tp, r.off)
	case r.del: // group tombstone: the group goes once nothing else of it is stored
		if g != nil {
			g.persisted = false
			if g.cg == nil && len(g.offsets) == 0 {
				delete(s.groups, r.group)
				s.groupGone(r.group)
			}
		}
	case load:
		if g == nil {
			g = s.newGroup(r.group, time.Time{})
		}
		g.restore(r.img)
		g.loaded = true
	case g != nil:
		g.persisted = true
		if g.generation == r.img.generation && g.state == CompletingRebalance {
			for i := range r.img.members {
				if m := g.memberByID(r.img.members[i].id); m != nil {
					m.assignment = r.img.members[i].assignment
				}
			}
		}
	}
}

// restore rebuilds the group's members from a stored image (loading).
func (g *Group) restore(img *groupImage) {
	for _, m := range g.members { // a duplicate record replaces the first
		g.dropMember(m, &Output{})
	}
	g.protocolType, g.generation, g.protocol, g.leader, g.stateTime = img.protocolType, img.generation, img.protocol, "", img.stateTime
	g.persisted = true
	g.loadRebalance = img.rebalance
	for i := range img.members {
		mi := &img.members[i]
		m := &member{id: mi.id, instanceID: mi.instanceID, clientID: mi.clientID, clientHost: mi.clientHost,
			sessionTimeout: mi.session, rebalanceTimeout: mi.rebalance, assignment: mi.assignment}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		// A loaded member knows only the selected protocol (as in Kafka),
		// so a rejoin with its full list counts as changed metadata.
		m.protocols = []kmsg.JoinGroupRequestProtocol{{Name: img.protocol, Metadata: mi.metadata}}
		g.addMember(m, img.protocolType)
	}
	if g.memberByID(img.leader) != nil {
		g.leader = img.leader
	}
}

// FinishLoad completes loading: groups with members come back Stable with
// their session timers armed (members that do not heartbeat in time are
// evicted), groups without members Empty; a group above the size limit
// rebalances.
func (s *Shard) FinishLoad(now time.Time, out *Output) {
	s.flushLoadedOffsets()
	kinds := s.loading.kinds
	s.loading = loading{}
	s.dropOrphanConsumerRecords(kinds, out)
	s.stormsAtLoad = true
	for _, id := range slices.Sorted(maps.Keys(s.hist)) {
		if s.groups[id] == nil {
			// The history of a group the store no longer holds (a
			// classic group not stored yet, which lost the offsets that
			// kept it; or written by a cohort that left it behind): a
			// history record never makes a group exist, so nothing else
			// would ever remove it, and a later group of the id would
			// take its events as its own. It goes as a deleted group's
			// does, once its tombstones are durable.
			if recs := s.historyTombstones(id, nil); len(recs) > 0 {
				s.write(out, recs, func(_ time.Time, code int16, _ *Output) {
					s.logWriteFailure(code, "group %q: deleting the history of a group that no longer exists failed", id)
				})
			}
			continue
		}
		s.evalStorm(id, now)
	}
	s.stormsAtLoad = false
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		if cg := g.cg; cg != nil {
			// Consumer-protocol members get a full session; those
			// revoking get a full rebalance timeout. The next heartbeat
			// recomputes the metadata hash (topics may have changed
			// while the partition was elsewhere).
			cg.subsDirty = true
			for _, mid := range cg.ids {
				m := cg.members[mid]
				s.armSession(m, now, g.sessionTimeout(m))
				if m.state == mUnrevoked {
					m.rebalanceEpoch = m.epoch
					s.arm(m.rebalance, now.Add(m.rebalanceTimeout))
				}
			}
			g.cLoaded(now) // rebalance history
		}
		if len(g.members) == 0 {
			g.state = Empty
			if g.stateTime.IsZero() {
				g.stateTime = now
			}
			g.updateSubscribed()
			continue
		}
		g.state = Stable
		g.updateSubscribed()
		for _, m := range g.members {
			s.arm(m.session, now.Add(m.sessionTimeout))
		}
		switch pending := g.loadRebalance; {
		case s.cfg.MaxSize > 0 && len(g.members) > s.cfg.MaxSize:
			c := causeOf(CauseLoaded, now, nil)
			c.Detail = "loaded above group.max.size"
			g.note(c)
			g.prepareRebalance(now, out)
		case pending:
			// Stored by a conversion from the consumer protocol,
			// whose rebalance had not completed: the members rejoin.
			c := causeOf(CauseLoaded, now, nil)
			c.Detail = "loaded while its conversion from the consumer protocol was rebalancing"
			g.note(c)
			g.prepareRebalance(now, out)
		}
		g.loadRebalance = false
	}
}
