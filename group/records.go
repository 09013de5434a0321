package group

import (
	"encoding/binary"
	"errors"
	"fmt"
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
//	  metadata (of the selected protocol), assignment
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

// metadataRecord encodes the group with each member's assignment taken from
// assignment(m).
func (g *Group) metadataRecord(assignment func(*member) []byte) Record {
	v := make([]byte, 0, 64+len(g.members)*96)
	v = binary.BigEndian.AppendUint16(v, groupValueVersion)
	v = appendString(v, g.protocolType)
	v = binary.BigEndian.AppendUint32(v, uint32(g.generation))
	v = appendString(v, g.protocol)
	v = appendString(v, g.leader)
	v = binary.BigEndian.AppendUint64(v, uint64(g.stateTime.UnixMilli()))
	v = binary.AppendUvarint(v, uint64(len(g.members)))
	for _, m := range g.members {
		v = appendString(v, m.id)
		v = appendString(v, m.instanceID)
		v = appendString(v, m.clientID)
		v = appendString(v, m.clientHost)
		v = binary.BigEndian.AppendUint32(v, uint32(m.sessionTimeout.Milliseconds()))
		v = binary.BigEndian.AppendUint32(v, uint32(m.rebalanceTimeout.Milliseconds()))
		v = appendBytes(v, m.metadataFor(g.protocol))
		v = appendBytes(v, assignment(m))
	}
	return Record{Key: groupKey(g.id), Value: v}
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// persistMetadata writes the group's current metadata and assignments.
func (g *Group) persistMetadata(out *Output, done func(time.Time, int16, *Output)) {
	rec := g.metadataRecord(func(m *member) []byte { return m.assignment })
	g.s.write(out, []Record{rec}, func(now time.Time, code int16, out *Output) {
		if code == ErrNone {
			g.persisted = true
		}
		done(now, code, out)
	})
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

// Load feeds one stored record into the shard while its partition loads.
// Records may come in any order; only live keys (no tombstones) are expected.
// Keys of unknown kinds are skipped. Call FinishLoad when all are in.
func (s *Shard) Load(key, value []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrCorruptRecord)
	}
	switch key[0] {
	case keyGroup:
		return s.loadGroup(string(key[1:]), value)
	case keyOffset:
		r := reader{b: key[1:]}
		group, topic := r.string(), r.string()
		p := int32(r.u32())
		if r.err {
			return fmt.Errorf("%w: offset key %x", ErrCorruptRecord, key)
		}
		return s.loadOffset(group, topicPartition{topic, p}, value)
	}
	return nil
}

func (s *Shard) loadedGroup(id string) *Group {
	if g := s.groups[id]; g != nil {
		return g
	}
	return s.newGroup(id, time.Time{})
}

func (s *Shard) loadOffset(group string, tp topicPartition, value []byte) error {
	r := reader{b: value}
	_ = r.u16() // version: every version starts with the v0 fields
	o := offset{}
	o.offset = int64(r.u64())
	o.leaderEpoch = int32(r.u32())
	o.metadata = r.string()
	o.commitMs = int64(r.u64())
	o.expireMs = int64(r.u64())
	if r.err {
		return fmt.Errorf("%w: offset of group %q %s/%d", ErrCorruptRecord, group, tp.topic, tp.partition)
	}
	g := s.loadedGroup(group)
	g.offsets[tp] = o
	return nil
}

func (s *Shard) loadGroup(id string, value []byte) error {
	r := reader{b: value}
	_ = r.u16()
	ptype := r.string()
	gen := int32(r.u32())
	proto := r.string()
	leader := r.string()
	stateTime := time.UnixMilli(int64(r.u64()))
	n := r.uvarint()
	if r.err || n > uint64(len(r.b)) {
		return fmt.Errorf("%w: group %q", ErrCorruptRecord, id)
	}
	g := s.loadedGroup(id)
	for _, m := range g.members { // a duplicate record replaces the first
		g.dropMember(m, &Output{})
	}
	g.protocolType, g.generation, g.protocol, g.leader, g.stateTime = ptype, gen, proto, "", stateTime
	g.persisted = true
	for i := uint64(0); i < n; i++ {
		m := &member{}
		m.id = r.string()
		m.instanceID = r.string()
		m.clientID = r.string()
		m.clientHost = r.string()
		m.sessionTimeout = time.Duration(r.u32()) * time.Millisecond
		m.rebalanceTimeout = time.Duration(int32(r.u32())) * time.Millisecond
		meta := r.bytes()
		m.assignment = append([]byte(nil), r.bytes()...)
		if r.err {
			return fmt.Errorf("%w: group %q member %d", ErrCorruptRecord, id, i)
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		// A loaded member knows only the selected protocol (as in Kafka),
		// so a rejoin with its full list counts as changed metadata.
		m.protocols = []kmsg.JoinGroupRequestProtocol{{Name: proto, Metadata: append([]byte(nil), meta...)}}
		g.addMember(m, ptype)
	}
	if g.byID[leader] != nil {
		g.leader = leader
	}
	return nil
}

// FinishLoad completes loading: groups with members come back Stable with
// their session timers armed (members that do not heartbeat in time are
// evicted), groups without members Empty; a group above the size limit
// rebalances.
func (s *Shard) FinishLoad(now time.Time, out *Output) {
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		if len(g.members) == 0 {
			g.state = Empty
			if g.stateTime.IsZero() {
				g.stateTime = now
			}
			continue
		}
		g.state = Stable
		g.updateSubscribed()
		for _, m := range g.members {
			s.arm(m.session, now.Add(m.sessionTimeout))
		}
		if s.cfg.MaxSize > 0 && len(g.members) > s.cfg.MaxSize {
			g.prepareRebalance(now, out)
		}
	}
}
