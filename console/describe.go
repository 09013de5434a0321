package console

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/grouphistory"
)

// describeGroups describes ids at their coordinators with every kept
// rebalance event, each list of which (more causes, members waited for,
// evicted, moves) holds at most lists entries (package grouphistory: kgo's
// own routing of DescribeGroups would drop the history's tagged fields).
// The groups page asks for no entries (it shows when the rebalances
// started), a group page for maxListed.
func describeGroups(ctx context.Context, cl *kgo.Client, ids []string, lists int32) ([]kmsg.DescribeGroupsResponseGroup, error) {
	return grouphistory.DescribeBounded(ctx, cl, ids, -1, lists)
}
