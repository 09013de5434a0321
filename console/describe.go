package console

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeGroups sends DescribeGroups for ids to each group's coordinator
// itself, asking for the rebalance history (tagged field 10001). kgo's own
// sharding of DescribeGroups rebuilds the request per broker and drops its
// tagged fields, so the console finds the coordinators (FindCoordinator)
// and addresses each broker directly. A group whose coordinator is not
// found answers with FindCoordinator's error code.
func describeGroups(ctx context.Context, cl *kgo.Client, ids []string) ([]kmsg.DescribeGroupsResponseGroup, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = ids
	fresp, err := fc.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []kmsg.DescribeGroupsResponseGroup
	byNode := map[int32][]string{}
	var order []int32
	for _, c := range fresp.Coordinators {
		if c.ErrorCode != 0 {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = c.Key, c.ErrorCode
			out = append(out, d)
			continue
		}
		if _, ok := byNode[c.NodeID]; !ok {
			order = append(order, c.NodeID)
		}
		byNode[c.NodeID] = append(byNode[c.NodeID], c.Key)
	}
	for _, node := range order {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = byNode[node]
		requestHistory(req)
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.(*kmsg.DescribeGroupsResponse).Groups...)
	}
	return out, nil
}
