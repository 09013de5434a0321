package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRevokingTagRoundTrip: what SetRevoking writes RevokingOf reads back,
// through a real encoding of the answer; an empty set writes no tag; a
// truncated or oversized value reads as no tag, without panicking.
func TestRevokingTagRoundTrip(t *testing.T) {
	m := kmsg.NewConsumerGroupDescribeResponseGroupMember()
	SetRevoking(&m, kmsg.Assignment{})
	if _, ok := RevokingOf(&m); ok || m.UnknownTags.Len() != 0 {
		t.Fatalf("an empty set wrote a tag")
	}
	SetRevoking(&m, kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{
		{Topic: "a", Partitions: []int32{2, 3}}, {Topic: "b", Partitions: []int32{0}}}})
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Version = 1
	g := kmsg.NewConsumerGroupDescribeResponseGroup()
	g.Members = append(g.Members, m)
	resp.Groups = append(resp.Groups, g)
	back := kmsg.NewPtrConsumerGroupDescribeResponse()
	back.Version = 1
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	got, ok := RevokingOf(&back.Groups[0].Members[0])
	if !ok || len(got) != 2 || got[0].Topic != "a" || !slices.Equal(got[0].Partitions, []int32{2, 3}) ||
		got[1].Topic != "b" || !slices.Equal(got[1].Partitions, []int32{0}) {
		t.Fatalf("read back %+v %v", got, ok)
	}
	var raw []byte
	m.UnknownTags.Each(func(_ uint32, v []byte) { raw = v })
	for _, bad := range [][]byte{raw[:len(raw)-1], append(slices.Clone(raw), 0), {0xff, 0xff, 0xff, 0xff, 0x0f}} {
		var b kmsg.ConsumerGroupDescribeResponseGroupMember
		b.UnknownTags.Set(RevokingTag, bad)
		if ts, ok := RevokingOf(&b); ok {
			t.Errorf("%x read as %+v", bad, ts)
		}
	}
}
