package consumer

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MemberDecoder decodes the subscriptions of one JoinGroup response for the
// group leader's assignor. It accepts and rejects exactly the bytes
// DecodeSubscription does and yields the same values, but it reads the
// bytes in place instead of decoding through kmsg and re-encoding to check
// the length fields, and it shares what members have in common:
//
//   - every topic name is allocated once per decoder, however many members
//     list it or own partitions of it;
//   - members whose topic lists are byte for byte the same get the same
//     Topics slice (assignors only read it);
//   - owned partitions of all members are cut from shared blocks;
//   - UserData aliases the input bytes instead of copying them, so the
//     input must stay unchanged while the members are in use.
//
// A MemberDecoder is not safe for concurrent use.
type MemberDecoder struct {
	names     map[string]string
	lists     map[string][]string
	lastList  []byte
	lastNames []string
	parts     []int32 // free room of the current partition block
	owned     []assign.TopicPartitions
}

// NewMemberDecoder returns a decoder for one group's subscriptions.
func NewMemberDecoder() *MemberDecoder {
	return &MemberDecoder{names: map[string]string{}, lists: map[string][]string{}}
}

// Member decodes one member's subscription bytes into the assignor's view
// of it and returns the layout version read (see Subscription.Version).
func (d *MemberDecoder) Member(b []byte, memberID, instanceID string) (assign.Member, int16, error) {
	if len(b) < 2 {
		return assign.Member{}, 0, fmt.Errorf("consumer: subscription of %d bytes has no version: %w", len(b), ErrMalformed)
	}
	wire := int16(binary.BigEndian.Uint16(b))
	if wire < 0 {
		return assign.Member{}, 0, fmt.Errorf("consumer: subscription version %d: %w", wire, ErrMalformed)
	}
	v := min(wire, MaxVersion)
	l, err := scanSubscription(b, v)
	if err != nil && wire == 1 {
		// kafka-go: version 1 header over the version-0 layout, accepted
		// only when that layout accounts for every byte.
		if l0, err0 := scanSubscription(b, 0); err0 == nil && l0.end == len(b) {
			l, err, v = l0, nil, 0
		}
	}
	if err != nil {
		return assign.Member{}, 0, fmt.Errorf("consumer: subscription version %d: %w", wire, err)
	}
	m := assign.Member{ID: memberID, InstanceID: instanceID, Generation: -1}
	m.Topics = d.topicList(b[l.topics:l.userData])
	if l.userDataLen >= 0 {
		m.UserData = b[l.userData+4 : l.userData+4+l.userDataLen : l.userData+4+l.userDataLen]
	}
	if l.nOwned > 0 {
		m.Owned = d.ownedList(b[l.owned:], l.nOwned, l.nParts)
	}
	if v >= 2 {
		m.Generation = l.generation
	}
	m.Rack = l.rack
	return m, v, nil
}

// layout records where a scanned subscription's fields are.
type layout struct {
	topics, userData int // offsets of the topic array and user data length
	userDataLen      int // -1 for null
	owned            int // offset of the first owned entry
	nOwned, nParts   int // owned entries and their partitions in total
	generation       int32
	rack             string
	end              int // bytes the layout accounts for
}

// scanSubscription checks b against the layout of version v (0..3) without
// decoding: every length in range, every array length non-negative and
// every null marker exactly -1, which is what DecodeSubscription's
// canonical re-encoding accepts.
func scanSubscription(b []byte, v int16) (layout, error) {
	r := reader{b: b, i: 2}
	l := layout{topics: 2, userDataLen: -1}
	n := r.arrayLen()
	for k := 0; k < n && !r.bad; k++ {
		r.skipString()
	}
	l.userData = r.i
	if ud := r.int32(); ud >= 0 {
		r.skip(int(ud))
		l.userDataLen = int(ud)
	} else if ud != -1 {
		r.fail()
	}
	if v >= 1 {
		l.nOwned = r.arrayLen()
		l.owned = r.i
		for k := 0; k < l.nOwned && !r.bad; k++ {
			r.skipString()
			np := r.arrayLen()
			r.skip(4 * np)
			l.nParts += np
		}
	}
	if v >= 2 {
		l.generation = r.int32()
	}
	if v >= 3 {
		if n := int(r.int16()); n >= 0 {
			if r.skip(n) {
				l.rack = string(b[r.i-n : r.i])
			}
		} else if n != -1 {
			r.fail()
		}
	}
	if r.bad {
		return layout{}, fmt.Errorf("truncated data or invalid length field: %w", ErrMalformed)
	}
	l.end = r.i
	return l, nil
}

// reader walks big-endian Kafka primitives; any shortfall or negative
// length marks it bad, after which it reads zeros.
type reader struct {
	b   []byte
	i   int
	bad bool
}

func (r *reader) fail() { r.bad, r.i = true, len(r.b) }

func (r *reader) skip(n int) bool {
	if r.bad || n < 0 || n > len(r.b)-r.i {
		r.fail()
		return false
	}
	r.i += n
	return true
}

func (r *reader) int16() int16 {
	if !r.skip(2) {
		return 0
	}
	return int16(binary.BigEndian.Uint16(r.b[r.i-2:]))
}

func (r *reader) int32() int32 {
	if !r.skip(4) {
		return 0
	}
	return int32(binary.BigEndian.Uint32(r.b[r.i-4:]))
}

// arrayLen reads a non-nullable array length; negative is malformed.
func (r *reader) arrayLen() int {
	n := r.int32()
	if n < 0 {
		r.fail()
		return 0
	}
	return int(n)
}

// skipString skips a non-nullable string.
func (r *reader) skipString() { r.skip(int(r.int16())) }

// name returns the decoder's copy of a topic name.
func (d *MemberDecoder) name(raw []byte) string {
	if s, ok := d.names[string(raw)]; ok {
		return s
	}
	s := string(raw)
	d.names[s] = s
	return s
}

// topicList decodes a scanned topic array (count and strings), sharing the
// slice with an earlier member that sent the same bytes.
func (d *MemberDecoder) topicList(raw []byte) []string {
	if d.lastList != nil && bytes.Equal(raw, d.lastList) {
		return d.lastNames
	}
	list, ok := d.lists[string(raw)]
	if !ok {
		n := int(binary.BigEndian.Uint32(raw))
		if n > 0 {
			list = make([]string, n)
			for i, k := 0, 4; i < n; i++ {
				l := int(binary.BigEndian.Uint16(raw[k:]))
				list[i] = d.name(raw[k+2 : k+2+l])
				k += 2 + l
			}
		}
		d.lists[string(raw)] = list
	}
	d.lastList, d.lastNames = raw, list
	return list
}

// ownedList decodes n scanned owned entries holding np partitions.
func (d *MemberDecoder) ownedList(b []byte, n, np int) []assign.TopicPartitions {
	if len(d.owned) < n {
		d.owned = make([]assign.TopicPartitions, max(n, 4096))
	}
	out := d.owned[:n:n]
	d.owned = d.owned[n:]
	if len(d.parts) < np {
		d.parts = make([]int32, max(np, 1<<16))
	}
	k := 0
	for i := range out {
		l := int(binary.BigEndian.Uint16(b[k:]))
		out[i].Topic = d.name(b[k+2 : k+2+l])
		k += 2 + l
		c := int(binary.BigEndian.Uint32(b[k:]))
		k += 4
		if c == 0 {
			continue
		}
		ps := d.parts[:c:c]
		d.parts = d.parts[c:]
		for j := range ps {
			ps[j] = int32(binary.BigEndian.Uint32(b[k:]))
			k += 4
		}
		out[i].Partitions = ps
	}
	return out
}

// AssignmentWriter encodes assignments one at a time, as a leader that
// receives its plan member by member (assign.Streamer) does. The encodings
// are cut from shared buffers of about a megabyte, so a large plan costs a
// few allocations, none of them a copy.
type AssignmentWriter struct {
	m   kmsg.ConsumerMemberAssignment
	buf []byte
}

// assignmentChunk is the size of the buffers an AssignmentWriter cuts
// encodings from (larger assignments get a buffer of their own size).
const assignmentChunk = 1 << 20

// NewAssignmentWriter returns a writer of assignments at the given version
// (0..3).
func NewAssignmentWriter(version int16) (*AssignmentWriter, error) {
	if version < 0 || version > MaxVersion {
		return nil, fmt.Errorf("consumer: cannot encode assignment version %d (supported 0..%d)", version, MaxVersion)
	}
	w := &AssignmentWriter{m: kmsg.NewConsumerMemberAssignment()}
	w.m.Version = version
	return w, nil
}

// Encode returns a's SyncGroup bytes. They do not alias a, and stay valid
// after later calls.
func (w *AssignmentWriter) Encode(a assign.Assignment) ([]byte, error) {
	size, err := assignmentSize(a)
	if err != nil {
		return nil, err
	}
	if cap(w.buf)-len(w.buf) < size {
		w.buf = make([]byte, 0, max(size, assignmentChunk))
	}
	return w.append(a), nil
}

func (w *AssignmentWriter) append(a assign.Assignment) []byte {
	w.m.Topics = w.m.Topics[:0]
	for _, tp := range a.Partitions {
		w.m.Topics = append(w.m.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: tp.Topic, Partitions: tp.Partitions})
	}
	w.m.UserData = a.UserData
	start := len(w.buf)
	w.buf = w.m.AppendTo(w.buf)
	return w.buf[start:len(w.buf):len(w.buf)]
}

// assignmentSize is the length of a's encoding, or an error for a topic
// name the protocol cannot carry.
func assignmentSize(a assign.Assignment) (int, error) {
	total := 2 + 4 + 4 + len(a.UserData)
	for _, tp := range a.Partitions {
		if err := checkString("topic", tp.Topic); err != nil {
			return 0, err
		}
		total += 2 + len(tp.Topic) + 4 + 4*len(tp.Partitions)
	}
	return total, nil
}

// EncodeAssignments writes the assignment of each member in as SyncGroup
// bytes at the given version (0..3), all cut from one buffer sized
// exactly. out[i] is the encoding of as[i].
func EncodeAssignments(version int16, as []assign.Assignment) ([][]byte, error) {
	w, err := NewAssignmentWriter(version)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, a := range as {
		n, err := assignmentSize(a)
		if err != nil {
			return nil, err
		}
		total += n
	}
	w.buf = make([]byte, 0, total)
	out := make([][]byte, len(as))
	for i, a := range as {
		out[i] = w.append(a)
	}
	return out, nil
}
