package group

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RevokingTag is a tagged field cohort adds to a member of a
// ConsumerGroupDescribe answer: the partitions the member has been told to
// give up and still holds (it has not acknowledged the revocation yet).
// Kafka's answer leaves them out of the member's assignment, and so does
// cohort's, so without the tag a member that holds up a reconciliation reads
// as holding exactly its target, and the partitions the others wait for as
// held by no one. The tag is present only on a member with such partitions;
// clients that do not know it skip it (franz-go keeps it in UnknownTags).
//
// Value: a compact array of topics, each a compact string (the topic's name)
// and a compact array of int32 partitions.
const RevokingTag = 10006

// SetRevoking puts a's topics and partitions into m's RevokingTag; an empty
// a sets nothing.
func SetRevoking(m *kmsg.ConsumerGroupDescribeResponseGroupMember, a kmsg.Assignment) {
	if len(a.TopicPartitions) == 0 {
		return
	}
	b := kbin.AppendCompactArrayLen(nil, len(a.TopicPartitions))
	for _, tp := range a.TopicPartitions {
		b = kbin.AppendCompactString(b, tp.Topic)
		b = kbin.AppendCompactArrayLen(b, len(tp.Partitions))
		for _, p := range tp.Partitions {
			b = kbin.AppendInt32(b, p)
		}
	}
	m.UnknownTags.Set(RevokingTag, b)
}

// RevokingTopic is one topic of a RevokingTag.
type RevokingTopic struct {
	Topic      string
	Partitions []int32
}

// RevokingOf reads m's RevokingTag. ok is false when m has none (nothing to
// revoke, or a server that is not cohort or older than the tag) or it does
// not decode.
func RevokingOf(m *kmsg.ConsumerGroupDescribeResponseGroupMember) (ts []RevokingTopic, ok bool) {
	m.UnknownTags.Each(func(key uint32, val []byte) {
		if key != RevokingTag {
			return
		}
		r := kbin.Reader{Src: val}
		var out []RevokingTopic
		n := r.CompactArrayLen()
		if n <= 0 {
			return // null or empty: never written
		}
		for ; n > 0 && r.Ok(); n-- {
			t := RevokingTopic{Topic: r.CompactString()}
			for k := r.CompactArrayLen(); k > 0 && r.Ok(); k-- {
				t.Partitions = append(t.Partitions, r.Int32())
			}
			out = append(out, t)
		}
		if r.Complete() == nil && len(r.Src) == 0 {
			ts, ok = out, true
		}
	})
	return ts, ok
}
