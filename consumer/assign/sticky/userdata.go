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
	if len(b) == 0 {
		return nil, -1, nil
	}
	var meta kmsg.StickyMemberMetadata
	if err := meta.ReadFrom(b); err != nil {
		return nil, -1, errUserData
	}
	owned = make([]assign.TopicPartitions, len(meta.CurrentAssignment))
	for i, a := range meta.CurrentAssignment {
		owned[i] = assign.TopicPartitions{Topic: a.Topic, Partitions: a.Partitions}
	}
	return owned, meta.Generation, nil
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
	if _, gen, err := decodeUserData(b); err == nil {
		return gen
	}
	return -1
}
