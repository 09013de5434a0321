package group

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerSummaryTag is a tagged field of a DescribeGroups answer (flexible
// versions, v5+) that sums up a consumer-protocol (KIP-848) group: how many
// members it has, its state, its group epoch and the assignor it uses.
//
// DescribeGroups describes classic groups; a consumer-protocol group answers
// as a missing one (state Dead, GROUP_ID_NOT_FOUND from v6), and
// ConsumerGroupDescribe describes it, with every member, its subscription
// and its assignment. A tool that shows only the summary (the console's
// groups page) would receive megabytes for groups of thousands of members.
// So when a request carries MembersTag (any n >= 0: the client asks for the
// member counts, not for members), each consumer-protocol group's entry,
// still answered as missing, carries this tag too. A request without
// MembersTag, every stock client's, gets no such tag: the answer it always
// got. A group the principal may not describe carries none.
//
// Value: int32 member count, compact string state (Empty, Assigning,
// Reconciling, Stable: ConsumerGroupDescribe's), int32 group epoch, compact
// string assignor name (ConsumerGroupDescribe's AssignorName). A later
// version may append fields; a reader ignores bytes after those it knows.
// It names no topic.
const ConsumerSummaryTag = 10004

// ConsumerSummary is the value of ConsumerSummaryTag.
type ConsumerSummary struct {
	Members  int32  // how many members the group has
	State    string // as ConsumerGroupDescribe's State
	Epoch    int32  // the group epoch
	Assignor string // as ConsumerGroupDescribe's AssignorName
}

// SetConsumerSummary puts s into d's ConsumerSummaryTag.
func SetConsumerSummary(d *kmsg.DescribeGroupsResponseGroup, s ConsumerSummary) {
	b := kbin.AppendInt32(nil, s.Members)
	b = kbin.AppendCompactString(b, s.State)
	b = kbin.AppendInt32(b, s.Epoch)
	b = kbin.AppendCompactString(b, s.Assignor)
	d.UnknownTags.Set(ConsumerSummaryTag, b)
}

// ConsumerSummaryOf reads d's ConsumerSummaryTag; ok is false when d has
// none (a classic or missing group, a request without MembersTag, a node
// that is not cohort or an older one, a version before v5) or it does not
// decode.
func ConsumerSummaryOf(d *kmsg.DescribeGroupsResponseGroup) (s ConsumerSummary, ok bool) {
	d.UnknownTags.Each(func(key uint32, val []byte) {
		if key != ConsumerSummaryTag {
			return
		}
		r := kbin.Reader{Src: val}
		s.Members = r.Int32()
		s.State = r.CompactString()
		s.Epoch = r.Int32()
		s.Assignor = r.CompactString()
		ok = r.Complete() == nil && s.Members >= 0
	})
	if !ok {
		return ConsumerSummary{}, false
	}
	return s, true
}

// consumerSummary sums up consumer-protocol group g for ConsumerSummaryTag.
func (s *Shard) consumerSummary(g *Group) ConsumerSummary {
	cg := g.cg
	return ConsumerSummary{
		Members:  int32(len(cg.members)),
		State:    cg.state(),
		Epoch:    cg.epoch,
		Assignor: cg.preferredAssignor(s.cfg.ConsumerAssignors),
	}
}
