package sticky

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeUserData writes Kafka's StickyAssignor user data: the member's
// current assignment, topics sorted by name (KAFKA-12898), followed by the
// generation (version 1, KIP-341). A generation below zero is "unknown" and
// is written as version 0, without the trailing generation, which is what
// the Java client and franz-go do for -1.
func encodeUserData(owned []assign.TopicPartitions, generation int32) []byte {
	meta := kmsg.NewStickyMemberMetadata()
	if generation >= 0 {
		meta.Generation = generation
	}
	// Merge repeated topics so every topic appears once, as Kafka writes it.
	byTopic := make(map[string]int, len(owned))
	for _, tp := range owned {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(meta.CurrentAssignment)
			byTopic[tp.Topic] = i
			meta.CurrentAssignment = append(meta.CurrentAssignment, kmsg.StickyMemberMetadataCurrentAssignment{Topic: tp.Topic})
		}
		meta.CurrentAssignment[i].Partitions = append(meta.CurrentAssignment[i].Partitions, tp.Partitions...)
	}
	slices.SortFunc(meta.CurrentAssignment, func(a, b kmsg.StickyMemberMetadataCurrentAssignment) int {
		return strings.Compare(a.Topic, b.Topic)
	})
	for i := range meta.CurrentAssignment {
		slices.Sort(meta.CurrentAssignment[i].Partitions)
	}
	return meta.AppendTo(nil)
}

// errUserData reports sticky user data that is not in Kafka's format.
var errUserData = errors.New("sticky: malformed user data")

// decodeUserData reads Kafka's StickyAssignor user data (version 0 or 1).
// The generation is -1 for version 0. Malformed bytes give errUserData; the
// assignor then treats the member as owning nothing, as Kafka does.
func decodeUserData(b []byte) (owned []assign.TopicPartitions, generation int32, err error) {
	generation, err = walkUserData(b, func(topic, parts []byte) {
		tp := assign.TopicPartitions{Topic: string(topic)}
		for k := 0; k < len(parts); k += 4 {
			tp.Partitions = append(tp.Partitions, int32(binary.BigEndian.Uint32(parts[k:])))
		}
		owned = append(owned, tp)
	})
	if err != nil {
		return nil, -1, err
	}
	return owned, generation, nil
}

// walkUserData reads Kafka's StickyAssignor user data in place, accepting
// exactly what decodeUserData accepts (kmsg's reading: a negative array
// length is an empty array, a generation follows when bytes remain, and
// bytes after it are ignored). When fn is not nil it is called for every
// topic entry with the name's bytes and the partitions' big-endian int32s,
// but only once the whole input is known to be valid. It allocates nothing.
func walkUserData(b []byte, fn func(topic, parts []byte)) (generation int32, err error) {
	if len(b) == 0 {
		return -1, nil
	}
	pass := func(fn func(topic, parts []byte)) (int32, bool) {
		i := 0
		int32At := func() (int32, bool) {
			if len(b)-i < 4 {
				return 0, false
			}
			i += 4
			return int32(binary.BigEndian.Uint32(b[i-4:])), true
		}
		n, ok := int32At()
		if !ok || int(n) > len(b)-i {
			return 0, false
		}
		for range max(n, 0) {
			if len(b)-i < 2 {
				return 0, false
			}
			l := int(int16(binary.BigEndian.Uint16(b[i:])))
			i += 2
			if l < 0 || l > len(b)-i {
				return 0, false
			}
			topic := b[i : i+l]
			i += l
			np, ok := int32At()
			if !ok || int(np) > len(b)-i {
				return 0, false
			}
			np = max(np, 0)
			if 4*int(np) > len(b)-i {
				return 0, false
			}
			if fn != nil {
				fn(topic, b[i:i+4*int(np)])
			}
			i += 4 * int(np)
		}
		if i == len(b) {
			return -1, true
		}
		return int32At()
	}
	gen, ok := pass(nil)
	if !ok {
		return -1, errUserData
	}
	if fn != nil {
		pass(fn)
	}
	return gen, nil
}

// cooperativeGeneration extracts a generation from user data when the
// subscription itself carries none (subscription v1): either sticky user
// data version 1, or the Java CooperativeStickyAssignor's user data, which
// is only the generation as an int32.
func cooperativeGeneration(b []byte) int32 {
	if len(b) == 4 {
		// Four bytes cannot hold a non-empty sticky assignment plus a
		// generation, and an empty v1 needs eight: this is Java's format.
		return int32(binary.BigEndian.Uint32(b))
	}
	if gen, err := walkUserData(b, nil); err == nil {
		return gen
	}
	return -1
}
