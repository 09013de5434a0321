package group

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTag is the tagged field cohort adds to each group of a
// DescribeGroups answer in flexible versions (v5+): Kafka's answer has no
// generation and no leader, and operators want both. The number is far above
// any tag Kafka assigns, and clients that do not know it skip it (tagged
// fields are optional by design; franz-go keeps it in UnknownTags).
//
// Value: int32 generation, then the leader's member id as a compact string
// (empty when the group has no leader).
const DescribeTag = 10000

// SetDescribeTag puts generation and leader into d's DescribeTag.
func SetDescribeTag(d *kmsg.DescribeGroupsResponseGroup, generation int32, leader string) {
	b := kbin.AppendInt32(nil, generation)
	b = kbin.AppendCompactString(b, leader)
	d.UnknownTags.Set(DescribeTag, b)
}

// DescribeTagOf reads the generation and leader from d's DescribeTag; ok is
// false when d has no such tag (a peer that is not cohort, or a version
// before v5) or it does not decode.
func DescribeTagOf(d *kmsg.DescribeGroupsResponseGroup) (generation int32, leader string, ok bool) {
	d.UnknownTags.Each(func(key uint32, val []byte) {
		if key != DescribeTag {
			return
		}
		r := kbin.Reader{Src: val}
		generation = r.Int32()
		leader = r.CompactString()
		ok = r.Complete() == nil
	})
	if !ok {
		return 0, "", false
	}
	return generation, leader, true
}
