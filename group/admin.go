package group

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizedGroupOps is the bitfield of ACL operations a group supports
// (READ=3, DELETE=6, DESCRIBE=8, DESCRIBE_CONFIGS=10, ALTER_CONFIGS=11: the
// set Kafka answers when it authorizes nothing, acl.SupportedOperations).
// The shard knows no principals and reports them all, on groups described
// without an error (an errored one keeps the field's default, as in
// Kafka); when ACLs are enforced, the server replaces the value with the
// principal's operations on the group (server/authz.go).
const authorizedGroupOps = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// opsUnset is the AuthorizedOperations of a described group that carries
// none: the field's default, INT32_MIN.
const opsUnset = -2147483648

// DescribeGroup describes one group (docs/group-semantics.md §describe). v is
// the request version; includeOps is IncludeAuthorizedOperations. It gives
// no LastHeardTag (it has no time to measure silences by): DescribeGroupAt
// does.
func (s *Shard) DescribeGroup(id string, v int16, includeOps bool) kmsg.DescribeGroupsResponseGroup {
	return s.describeGroup(id, v, includeOps, -1, time.Time{})
}

// DescribeGroupAt is DescribeGroup at now: in flexible versions (v5+) each
// member carries LastHeardTag.
func (s *Shard) DescribeGroupAt(id string, v int16, includeOps bool, now time.Time) kmsg.DescribeGroupsResponseGroup {
	return s.describeGroup(id, v, includeOps, -1, now)
}

// describeGroup is DescribeGroup listing at most maxMembers members and
// giving the member count in MembersTag, or a consumer-protocol group's
// summary in ConsumerSummaryTag; maxMembers < 0: every member, no count, no
// summary (a request without the tag). now dates the members' LastHeardTag
// (zero: none).
func (s *Shard) describeGroup(id string, v int16, includeOps bool, maxMembers int, now time.Time) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = id
	d.AuthorizedOperations = opsUnset
	if includeOps {
		d.AuthorizedOperations = authorizedGroupOps
	}
	g := s.groups[id]
	if g == nil || g.state == Dead || g.cg != nil {
		// A consumer-protocol group is described by ConsumerGroupDescribe;
		// here it answers as a missing group, as Kafka does.
		d.State = Dead.String()
		if v >= 6 {
			d.ErrorCode = ErrGroupIDNotFound
			msg := "group " + id + " not found"
			d.ErrorMessage = &msg
			d.AuthorizedOperations = opsUnset
		}
		if maxMembers >= 0 && v >= 5 && g != nil && g.cg != nil && g.state != Dead {
			// Asked for the member counts (MembersTag): a
			// consumer-protocol group sums itself up.
			SetConsumerSummary(&d, s.consumerSummary(g))
		}
		return d
	}
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	if v >= 5 {
		SetDescribeTag(&d, g.generation, g.leader)
	}
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	members := g.members
	if maxMembers >= 0 {
		SetMemberCount(&d, int32(len(members)))
		members = members[:min(len(members), maxMembers)]
	}
	for _, m := range members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = m.id
		if m.instanceID != "" {
			inst := m.instanceID
			dm.InstanceID = &inst
		}
		dm.ClientID = m.clientID
		dm.ClientHost = "/" + m.clientHost
		// The assignment in every state (what the member was last given,
		// kept through a rebalance that started from Stable), the
		// metadata only while Stable, as Kafka's coordinator describes.
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, m.assignment
		if dm.MemberAssignment == nil {
			dm.MemberAssignment = []byte{}
		}
		if stable {
			dm.ProtocolMetadata = m.metadataFor(g.protocol)
		}
		if v >= 5 && !now.IsZero() {
			if l, ok := g.lastHeard(m, now); ok {
				dm.UnknownTags.Set(LastHeardTag, appendLastHeard(l))
			}
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// ListGroups lists the shard's groups that pass the request's state and type
// filters (case-insensitive; empty filters match everything).
func (s *Shard) ListGroups(req *kmsg.ListGroupsRequest) []kmsg.ListGroupsResponseGroup {
	var out []kmsg.ListGroupsResponseGroup
	if len(req.StatesFilter) == 0 && len(req.TypesFilter) == 0 {
		out = make([]kmsg.ListGroupsResponseGroup, 0, len(s.groups)) // every group, bar Dead ones
	}
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		state, gtype, ok := listedAs(g, req)
		if !ok {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = id
		lg.ProtocolType = g.protocolType
		lg.GroupState = state
		lg.GroupType = gtype
		out = append(out, lg)
	}
	return out
}

// listedAs is g's state and type as ListGroups names them, and whether it
// is listed: not Dead, and passing req's state and type filters.
func listedAs(g *Group, req *kmsg.ListGroupsRequest) (state, gtype string, ok bool) {
	if g.state == Dead {
		return "", "", false
	}
	state, gtype = g.state.String(), "classic"
	if g.cg != nil {
		state, gtype = g.cg.state(), "consumer"
	}
	if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(f string) bool {
		return strings.EqualFold(javaTrim(f), state) // Kafka trims states, not types
	}) {
		return "", "", false
	}
	if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, gtype) {
		return "", "", false
	}
	return state, gtype, true
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// DeleteGroups deletes the listed groups of this shard (docs/group-semantics.md
// §delete): only Empty groups can be deleted; their offsets and metadata are
// tombstoned and the response is released once that is durable.
func (s *Shard) DeleteGroups(now time.Time, t Ticket, req *kmsg.DeleteGroupsRequest, out *Output) {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = req.Version
	var recs []rec
	var deleting []*Group
	var idx []int
	var emptySince []time.Time // of the groups deleting: restored if the write fails
	// The tombstones go into one slice made at its final size: grown by
	// append, a request deleting many groups copied its records (a rec is
	// about 200 bytes) again and again, allocating about five times what
	// it kept.
	if n := s.deletionRecs(req.Groups); n > 0 {
		recs = make([]rec, 0, n)
	}
	for _, id := range req.Groups {
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group = id
		g := s.groups[id]
		switch {
		case g == nil || g.state == Dead:
			r.ErrorCode = ErrGroupIDNotFound
			if req.Version >= 3 {
				r.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %q does not exist", id))
			}
		case !g.empty():
			r.ErrorCode = ErrNonEmptyGroup
			if req.Version >= 3 {
				state, n := g.state.String(), len(g.members)
				if g.cg != nil {
					state, n = g.cg.state(), len(g.cg.members)
				}
				noun := "members"
				if n == 1 {
					noun = "member"
				}
				r.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("group %q is %s with %d %s: only a group without members can be deleted", id, state, n, noun))
			}
		default:
			recs = g.appendDeletion(recs)
			emptySince = append(emptySince, g.stateTime)
			g.transition(Dead, now)
			deleting = append(deleting, g)
			idx = append(idx, len(resp.Groups))
		}
		resp.Groups = append(resp.Groups, r)
	}
	if len(recs) == 0 {
		out.reply(t, resp)
		return
	}
	// Once durable, replaying the tombstones removed the groups.
	s.write(out, recs, func(now time.Time, code int16, out *Output) {
		if code == ErrNone {
			out.reply(t, resp)
			return
		}
		for i, g := range deleting {
			resp.Groups[idx[i]].ErrorCode = code
			if s.groups[g.id] == g {
				// Empty again, since when it was: a failed delete
				// must not restart its offsets' retention.
				g.transition(Empty, emptySince[i])
			}
		}
		out.reply(t, resp)
	})
}

// deletionRecs is how many tombstones deleting the groups of ids that can
// be deleted takes (at most: appendDeletion may need fewer).
func (s *Shard) deletionRecs(ids []string) int {
	n := 0
	for _, id := range ids {
		if g := s.groups[id]; g != nil && g.state != Dead && g.empty() {
			n += g.deletionRecs()
		}
	}
	return n
}

// deletionRecs is at least how many records appendDeletion appends.
func (g *Group) deletionRecs() int {
	n := g.offsets.len() + 3 // the group's and consumer group's tombstones
	for _, c := range g.inflight {
		n += len(c.recs)
	}
	if h := g.s.hist[g.id]; h != nil {
		n += len(h.events) + len(h.loaded) + len(h.trimmed) + len(h.writing)
	}
	return n
}

// appendDeletion appends the tombstones that delete the group: its offsets,
// those of commits still being written (they reach the store before these
// tombstones, since writes are ordered; without a tombstone they would come
// back at the next load), and its metadata.
func (g *Group) appendDeletion(recs []rec) []rec {
	g.offsets.each(func(tp topicPartition, _ offset) { recs = append(recs, offsetTombstone(g.id, tp)) })
	for _, c := range g.inflight {
		for _, r := range c.recs {
			if !g.hasOffset(r.tp) {
				recs = append(recs, offsetTombstone(g.id, r.tp))
			}
		}
	}
	return g.s.historyTombstones(g.id, g.ownTombstones(recs, g.persisted || g.cg == nil))
}

// ownTombstones appends the tombstones of the group's own records that a
// write deleting it (DeleteGroups, retention) carries: its consumer group's
// record and target metadata if it is a consumer group, its classic record
// if classic (the caller tells whether one may be stored, or on its way).
// While a write converting the group between the protocols is in flight (or
// failed, until the partition reloads), the record that conversion
// tombstones may still be in the store: its tombstone is carried too, or a
// lost conversion left it stored, and the group removed without a word to
// any client came back at the reload in its former protocol (cgending.go).
func (g *Group) ownTombstones(recs []rec, classic bool) []rec {
	if g.cg != nil {
		recs = append(recs, cTombstone(keyCTMeta, g.id, ""), cTombstone(keyCGroup, g.id, ""))
		classic = classic || g.s.ending[g.id].classic > 0
	} else {
		recs = append(recs, g.s.endingConsumer(g.id)...)
	}
	if classic {
		recs = append(recs, groupTombstone(g.id))
	}
	return recs
}

// empty reports whether the group has no members (of either protocol).
func (g *Group) empty() bool {
	if g.cg != nil {
		return len(g.cg.members) == 0
	}
	return g.state == Empty
}
