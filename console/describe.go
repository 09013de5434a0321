package console

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/grouphistory"
)

// describeGroups describes ids at their coordinators with every kept
// rebalance event (package grouphistory: kgo's own routing of
// DescribeGroups would drop the history's tagged field).
func describeGroups(ctx context.Context, cl *kgo.Client, ids []string) ([]kmsg.DescribeGroupsResponseGroup, error) {
	return grouphistory.Describe(ctx, cl, ids, -1)
}
