// Package consumer is cohort's consumer group client and the codec it is
// built on. Group joins a group of protocol type "consumer" as any Kafka
// consumer does, runs the leader's assignor (package consumer/assign), tells
// the caller what it owns, and commits offsets fenced by generation; start
// there to own partitions of a topic. The rest of the package is the codec of
// Kafka's consumer embedded protocol: the
// bytes a member of a group with protocol type "consumer" puts in JoinGroup
// (its Subscription) and the bytes the leader hands each member in SyncGroup
// (its Assignment). The coordinator treats both as opaque; only members and
// the leader's assignor read them, so every client must agree on the layout
// byte for byte. The structs of the wire layout come from franz-go's kmsg
// package; this package adds a small cohort-facing API and the leniency that
// real peers need:
//
//   - trailing bytes after the fields a version defines are ignored (newer
//     versions append fields);
//   - a version above 3 is read with the version-3 layout;
//   - segmentio/kafka-go's ConsumerGroup announces version 1 but writes the
//     version-0 layout (no owned partitions); such bytes decode as version 0.
//
// Truly malformed bytes (truncated data, negative or otherwise impossible
// length fields, negative versions) yield an error wrapping ErrMalformed.
package consumer

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxVersion is the highest Subscription and Assignment version this package
// writes and understands field by field (Kafka 3.5+, KIP-881 rack).
const MaxVersion int16 = 3

// ErrMalformed is wrapped by every decoding error caused by invalid bytes.
var ErrMalformed = errors.New("malformed consumer protocol bytes")

// Subscription is what a consumer announces in JoinGroup
// (ConsumerProtocolSubscription, kmsg.ConsumerMemberMetadata).
type Subscription struct {
	// Version is the layout version: 0..3 when encoding; when decoding, the
	// layout that was read (the wire version capped at 3, or 0 for
	// kafka-go's version-1 header over the version-0 layout).
	Version int16
	// Topics the member subscribes to.
	Topics []string
	// UserData is assignor-specific; nil encodes as a null byte array.
	UserData []byte
	// Owned lists the partitions the member owns now (version 1+; dropped
	// when encoding version 0).
	Owned []assign.TopicPartitions
	// Generation of Owned (version 2+), -1 if unknown. When decoding a
	// version below 2 it is -1.
	Generation int32
	// Rack is the member's rack (version 3+); "" encodes as null.
	Rack string
}

// Assignment is what the leader hands one member in SyncGroup
// (ConsumerProtocolAssignment, kmsg.ConsumerMemberAssignment). All versions
// 0..3 share one layout; the version only mirrors the subscription version.
type Assignment struct {
	Version    int16
	Partitions []assign.TopicPartitions
	UserData   []byte // nil encodes as a null byte array
}

// Encode returns the wire bytes of s. Fields the version does not carry are
// dropped, as Kafka's own serializer does. It fails on a version outside
// 0..3 and on strings too long for the int16 length prefix.
func (s Subscription) Encode() ([]byte, error) {
	if s.Version < 0 || s.Version > MaxVersion {
		return nil, fmt.Errorf("consumer: cannot encode subscription version %d (supported 0..%d)", s.Version, MaxVersion)
	}
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = s.Version
	m.Topics = s.Topics
	m.UserData = s.UserData
	m.Generation = s.Generation
	for _, t := range s.Topics {
		if err := checkString("topic", t); err != nil {
			return nil, err
		}
	}
	for _, tp := range s.Owned {
		if err := checkString("topic", tp.Topic); err != nil {
			return nil, err
		}
		m.OwnedPartitions = append(m.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: tp.Topic, Partitions: tp.Partitions})
	}
	if s.Rack != "" {
		if err := checkString("rack", s.Rack); err != nil {
			return nil, err
		}
		rack := s.Rack
		m.Rack = &rack
	}
	return m.AppendTo(nil), nil
}

// Encode returns the wire bytes of a. It fails on a version outside 0..3 and
// on topic names too long for the int16 length prefix.
func (a Assignment) Encode() ([]byte, error) {
	if a.Version < 0 || a.Version > MaxVersion {
		return nil, fmt.Errorf("consumer: cannot encode assignment version %d (supported 0..%d)", a.Version, MaxVersion)
	}
	m := kmsg.NewConsumerMemberAssignment()
	m.Version = a.Version
	m.UserData = a.UserData
	for _, tp := range a.Partitions {
		if err := checkString("topic", tp.Topic); err != nil {
			return nil, err
		}
		m.Topics = append(m.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: tp.Topic, Partitions: tp.Partitions})
	}
	return m.AppendTo(nil), nil
}

func checkString(what, s string) error {
	if len(s) > math.MaxInt16 {
		return fmt.Errorf("consumer: %s name of %d bytes exceeds the protocol limit of %d", what, len(s), math.MaxInt16)
	}
	return nil
}

// DecodeSubscription parses subscription bytes (see the package doc for the
// leniency rules). The result does not alias b.
func DecodeSubscription(b []byte) (Subscription, error) {
	if len(b) < 2 {
		return Subscription{}, fmt.Errorf("consumer: subscription of %d bytes has no version: %w", len(b), ErrMalformed)
	}
	wire := int16(uint16(b[0])<<8 | uint16(b[1]))
	if wire < 0 {
		return Subscription{}, fmt.Errorf("consumer: subscription version %d: %w", wire, ErrMalformed)
	}
	m, err := readSubscription(b)
	if err != nil && wire == 1 {
		// kafka-go: version 1 header, version 0 body. Accept only when
		// the version-0 layout accounts for every byte, so that a
		// genuinely truncated v1 subscription still fails.
		v0 := bytes.Clone(b)
		v0[0], v0[1] = 0, 0
		if m0, err0 := readSubscription(v0); err0 == nil && canonicalLen(&m0) == len(b) {
			m, err = m0, nil
		}
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("consumer: subscription version %d: %w", wire, err)
	}
	s := Subscription{
		Version:    min(m.Version, MaxVersion),
		Topics:     m.Topics,
		UserData:   m.UserData,
		Generation: m.Generation,
	}
	if s.Version < 2 {
		s.Generation = -1
	}
	for _, o := range m.OwnedPartitions {
		s.Owned = append(s.Owned, assign.TopicPartitions{Topic: o.Topic, Partitions: o.Partitions})
	}
	if m.Rack != nil {
		s.Rack = *m.Rack
	}
	return s, nil
}

// readSubscription decodes with kmsg and then checks that kmsg's canonical
// re-encoding of what it read is a prefix of the input. kmsg reads a
// negative array length as an empty array and any negative nullable length
// as null; the prefix check turns those into errors, so only bytes that a
// correct encoder could have written are accepted.
func readSubscription(b []byte) (kmsg.ConsumerMemberMetadata, error) {
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(b); err != nil {
		return m, fmt.Errorf("truncated data or invalid length field: %w", ErrMalformed)
	}
	if err := checkPrefix(m.AppendTo(nil), b); err != nil {
		return m, err
	}
	m.UserData = bytes.Clone(m.UserData)
	return m, nil
}

func canonicalLen(m *kmsg.ConsumerMemberMetadata) int { return len(m.AppendTo(nil)) }

func checkPrefix(canon, b []byte) error {
	for i := range canon {
		if i >= len(b) || canon[i] != b[i] {
			return fmt.Errorf("invalid length field at byte %d (negative array length or null marker other than -1): %w", i, ErrMalformed)
		}
	}
	return nil
}

// DecodeAssignment parses assignment bytes. Zero-length input decodes as an
// empty assignment without error: Kafka's coordinator hands exactly that to
// members the leader left out of SyncGroup. Trailing bytes are ignored and a
// version above 3 is reported as 3. The result does not alias b.
func DecodeAssignment(b []byte) (Assignment, error) {
	if len(b) == 0 {
		return Assignment{}, nil
	}
	if len(b) < 2 {
		return Assignment{}, fmt.Errorf("consumer: assignment of %d byte has no version: %w", len(b), ErrMalformed)
	}
	var m kmsg.ConsumerMemberAssignment
	if err := m.ReadFrom(b); err != nil {
		return Assignment{}, fmt.Errorf("consumer: assignment: truncated data or invalid length field: %w", ErrMalformed)
	}
	if m.Version < 0 {
		return Assignment{}, fmt.Errorf("consumer: assignment version %d: %w", m.Version, ErrMalformed)
	}
	if err := checkPrefix(m.AppendTo(nil), b); err != nil {
		return Assignment{}, fmt.Errorf("consumer: assignment version %d: %w", m.Version, err)
	}
	a := Assignment{Version: min(m.Version, MaxVersion), UserData: bytes.Clone(m.UserData)}
	for _, t := range m.Topics {
		a.Partitions = append(a.Partitions, assign.TopicPartitions{Topic: t.Topic, Partitions: t.Partitions})
	}
	return a, nil
}

// Member builds the assignor's view of a member from its decoded
// subscription, its member id and its static instance id ("" if dynamic).
func (s Subscription) Member(memberID, instanceID string) assign.Member {
	return assign.Member{
		ID:         memberID,
		InstanceID: instanceID,
		Topics:     s.Topics,
		UserData:   s.UserData,
		Owned:      s.Owned,
		Generation: s.Generation,
		Rack:       s.Rack,
	}
}

// FromAssign converts an assignor's result for one member into the
// Assignment to encode at the given version.
func FromAssign(version int16, a assign.Assignment) Assignment {
	return Assignment{Version: version, Partitions: a.Partitions, UserData: a.UserData}
}
