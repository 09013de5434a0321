package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConsumerGroup describes one consumer-protocol group
// (ConsumerGroupDescribe): its state and epochs, the assignor, and each
// member with its current assignment (without the partitions pending
// revocation, as Kafka's; those are in RevokingTag) and its target. It gives
// no LastHeardTag: DescribeConsumerGroupAt does.
func (s *Shard) DescribeConsumerGroup(id string, v int16, includeOps bool) kmsg.ConsumerGroupDescribeResponseGroup {
	return s.DescribeConsumerGroupAt(id, v, includeOps, time.Time{})
}

// DescribeConsumerGroupAt is DescribeConsumerGroup at now: each member
// carries LastHeardTag (every version of ConsumerGroupDescribe is
// flexible); a zero now gives none.
func (s *Shard) DescribeConsumerGroupAt(id string, v int16, includeOps bool, now time.Time) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = id
	if id == "" {
		d.ErrorCode = ErrInvalidGroupID
		return d
	}
	g := s.groups[id]
	if g == nil || g.cg == nil || g.state == Dead {
		d.ErrorCode = ErrGroupIDNotFound
		msg := "Group " + id + " not found."
		d.ErrorMessage = &msg
		return d
	}
	if includeOps {
		d.AuthorizedOperations = authorizedGroupOps
	}
	cg := g.cg
	d.State = cg.state()
	d.Epoch, d.AssignmentEpoch = cg.epoch, cg.assignEpoch
	d.AssignorName = cg.preferredAssignor(s.cfg.ConsumerAssignors)
	for _, mid := range cg.ids {
		m := cg.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch = m.id, m.epoch
		if m.instanceID != "" {
			dm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		if m.rack != "" {
			dm.RackID = kmsg.StringPtr(m.rack)
		}
		dm.ClientID, dm.ClientHost = m.clientID, "/"+m.clientHost
		dm.SubscribedTopics = slices.Clone(m.names)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			dm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		// What it is assigned, not what it still has to revoke, as
		// Kafka describes a member.
		dm.Assignment = s.describeSet(m.assigned)
		// What it still holds and must give up, in cohort's tag.
		SetRevoking(&dm, s.describeSet(m.pending))
		dm.TargetAssignment = s.describeSet(cg.target[m.id])
		if !now.IsZero() {
			if l, ok := g.consumerLastHeard(m, now); ok {
				dm.UnknownTags.Set(LastHeardTag, appendLastHeard(l))
			}
		}
		dm.MemberType = 1 // a consumer-protocol member
		if m.classic != nil {
			dm.MemberType = 0 // a classic member of a mixed group
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// describeSet lists a partition set for ConsumerGroupDescribe, with topic
// ids and names; topics that no longer exist are left out.
func (s *Shard) describeSet(set tpset) kmsg.Assignment {
	var a kmsg.Assignment
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, name := range set.topics() {
		t, ok := s.cfg.Topics.Lookup(name)
		if !ok {
			continue
		}
		a.TopicPartitions = append(a.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t.ID, Topic: name,
			Partitions: slices.Clone(set[name])})
	}
	return a
}

// validateConsumerCommit checks an OffsetCommit into a consumer-protocol
// group (KIP-848 with KIP-1251's per-partition epochs). GenerationId carries
// the member epoch. An empty group takes admin commits (epoch < 0); otherwise
// the member must exist and commit with OffsetCommit v9+. A commit at the
// member's epoch is accepted; a higher epoch is stale; a lower one is
// accepted only if every partition it commits is still the member's
// (assigned or pending) and was given to it at or before that epoch — so a
// member whose newer epoch is still in flight can commit what it kept,
// while commits for partitions that moved stay fenced. A rejection fails the
// whole request; a partition whose metadata is too large is left out of
// that check (it gets its own error). Commits do not extend a consumer
// member's session.
func (g *Group) validateConsumerCommit(req *kmsg.OffsetCommitRequest) int16 {
	cg := g.cg
	if len(cg.members) == 0 && req.Generation < 0 {
		return ErrNone
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return ErrUnknownMemberID
	}
	stale := ErrStaleMemberEpoch
	if m.classic != nil {
		// A classic member commits with its generation, at any version,
		// and is told ILLEGAL_GENERATION as in a classic group.
		stale = ErrIllegalGeneration
	} else if req.Version < 9 {
		return ErrUnsupportedVersion
	}
	e := req.Generation
	switch {
	case e == m.epoch:
		return ErrNone
	case e > m.epoch:
		return stale
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if g.s.metadataTooLarge(strOr(p.Metadata)) {
				// Answered OFFSET_METADATA_TOO_LARGE on its own and never
				// committed: as in Kafka, it is not checked against the
				// epoch, so it cannot fail the rest of the request.
				continue
			}
			at, ok := m.assignedAt[topicPartition{t.Topic, p.Partition}]
			if !ok || at > e {
				return stale
			}
		}
	}
	return ErrNone
}

// validateConsumerFetch checks an OffsetFetch v9+ group entry that names a
// member of a consumer-protocol group: the member must exist and the epoch
// match exactly. An admin fetch (no member id, epoch < 0) is always served.
func (g *Group) validateConsumerFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return ErrNone
	}
	m := g.cg.members[strOr(memberID)]
	switch {
	case m == nil:
		return ErrUnknownMemberID
	case m.epoch != epoch && m.classic != nil:
		return ErrIllegalGeneration // a classic member's epoch is its generation
	case m.epoch != epoch:
		return ErrStaleMemberEpoch
	}
	return ErrNone
}
