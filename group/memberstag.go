package group

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MembersTag is a tagged field of DescribeGroups (flexible versions, v5+),
// in the request and in the answer, that bounds the members described.
//
// In a request its value is an int32 n >= 0: each classic group lists at
// most its first n members, in the order DescribeGroups lists them (join
// order), the others left out whole (id, metadata and assignment). A page
// that shows only how many members a group has asks for n = 0: a group of
// thousands of members with their metadata and assignments is an answer of
// megabytes.
//
// In the answer, when the request carried the tag, each classic group that
// exists carries it too with an int32: how many members the group has, those
// left out included. A missing group, and a consumer-protocol group (which
// answers as missing here; ConsumerGroupDescribe describes it), carries
// none: a consumer-protocol group carries its member count, state, epoch
// and assignor in ConsumerSummaryTag instead. A request without the tag gets the answer it always got, every
// member and no count; a server that does not know the tag ignores it and
// lists every member, so a client reads the count with MemberCountOf and
// falls back to len(Members).
const MembersTag = 10003

// RequestMembers asks, in req, for at most n members of each group, and for
// each group's member count (MembersTag). It needs a flexible version (v5+).
func RequestMembers(req *kmsg.DescribeGroupsRequest, n int32) {
	req.UnknownTags.Set(MembersTag, kbin.AppendInt32(nil, n))
}

// MembersRequested reports whether req bounds the members (MembersTag), and
// to how many per group.
func MembersRequested(req *kmsg.DescribeGroupsRequest) (n int32, ok bool) {
	if req.Version < 5 {
		return 0, false
	}
	req.UnknownTags.Each(func(key uint32, val []byte) {
		if key != MembersTag || len(val) != 4 {
			return
		}
		n, ok = int32(binary.BigEndian.Uint32(val)), true
	})
	return n, ok && n >= 0
}

// SetMemberCount puts the group's member count into d's MembersTag.
func SetMemberCount(d *kmsg.DescribeGroupsResponseGroup, count int32) {
	d.UnknownTags.Set(MembersTag, kbin.AppendInt32(nil, count))
}

// MemberCountOf reads how many members the group has from d's MembersTag;
// ok is false when d has none (not asked for, not cohort, a version before
// v5, a missing group) or it does not decode.
func MemberCountOf(d *kmsg.DescribeGroupsResponseGroup) (count int, ok bool) {
	d.UnknownTags.Each(func(key uint32, val []byte) {
		if key != MembersTag || len(val) != 4 {
			return
		}
		if c := int32(binary.BigEndian.Uint32(val)); c >= 0 {
			count, ok = int(c), true
		}
	})
	return count, ok
}
