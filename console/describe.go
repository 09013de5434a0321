package console

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/grouphistory"
)

// describeGroups describes ids at their coordinators with every kept
// rebalance event, each list of which (more causes, members waited for,
// evicted, moves) holds at most lists entries, and with at most members
// members per classic group, whose count the node then gives
// (group.MembersTag, read by memberCount), as it gives a summary of each
// consumer-protocol group (group.ConsumerSummaryTag). Package grouphistory
// sends it: kgo's own routing of DescribeGroups would drop the tagged
// fields. The groups page asks for no list entries (it shows when the
// rebalances started) and no members (it shows how many), a group page for
// maxListed entries and maxMemberRows members.
func describeGroups(ctx context.Context, cl *kgo.Client, ids []string, lists, members int32) ([]kmsg.DescribeGroupsResponseGroup, error) {
	// The coordinators are asked of the console's own node (the seed), as
	// the nodes to list the groups of are (askEveryNode).
	at := func(node int32) *kgo.Broker { return nodeBroker(cl, node) }
	return grouphistory.DescribeAt(ctx, cl, selfBroker(cl), at, ids, grouphistory.Limits{Events: -1, Lists: lists, Members: members})
}

// memberCount is how many members d's group has: the count the node gives
// (group.MembersTag), or, from a node that does not know the tag and lists
// every member, the members listed.
func memberCount(d *kmsg.DescribeGroupsResponseGroup) int {
	if n, ok := group.MemberCountOf(d); ok {
		return n
	}
	return len(d.Members)
}
