// Package grouphistory asks cohort for groups' rebalance histories: it sends
// DescribeGroups, with the history tag of package group (10001), to each
// group's coordinator itself. The console and the cohort command share it.
//
// Why not kgo's own routing: kgo shards DescribeGroups by coordinator and
// rebuilds the request for each broker, which drops the request's tagged
// fields, so the history would never be asked for. Describe therefore finds
// the coordinators (FindCoordinator) and addresses each broker directly.
package grouphistory

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
)

// Describe sends DescribeGroups for ids to each group's coordinator, asking
// for the last n rebalance events of each (n < 0: every event kept; 0: none,
// but still the storm and waiting views). Read each answer's history with
// group.HistoryTagOf. A group whose coordinator is not found answers with
// FindCoordinator's error code (and message). The answers are grouped by
// coordinator, in the order the coordinators were first named.
func Describe(ctx context.Context, cl *kgo.Client, ids []string, n int32) ([]kmsg.DescribeGroupsResponseGroup, error) {
	return DescribeBounded(ctx, cl, ids, n, -1)
}

// DescribeBounded is Describe with at most m entries in each list of the
// events and waiting view (group.HistoryListsTag; m < 0: no bound). A node
// that does not know the bound returns every entry.
func DescribeBounded(ctx context.Context, cl *kgo.Client, ids []string, n, m int32) ([]kmsg.DescribeGroupsResponseGroup, error) {
	return DescribeLimited(ctx, cl, ids, Limits{Events: n, Lists: m, Members: -1})
}

// Limits bound what DescribeLimited asks for.
type Limits struct {
	// Events is how many of the latest rebalance events (group.HistoryTag;
	// < 0: every event kept).
	Events int32
	// Lists bounds each list of the events and the waiting view
	// (group.HistoryListsTag; < 0: no bound).
	Lists int32
	// Members bounds the members listed per classic group, and asks for
	// each group's member count (group.MembersTag, read with
	// group.MemberCountOf) and each consumer-protocol group's summary
	// (group.ConsumerSummaryTag, read with group.ConsumerSummaryOf); < 0:
	// every member, no count, no summary.
	Members int32
}

// DescribeLimited is Describe within l. A node that does not know a bound
// ignores it: it returns every entry (and every member, with no count).
func DescribeLimited(ctx context.Context, cl *kgo.Client, ids []string, l Limits) ([]kmsg.DescribeGroupsResponseGroup, error) {
	return DescribeAt(ctx, cl, nil, nil, ids, l)
}

// DescribeAt is DescribeLimited that asks finder which node coordinates
// each group (nil: any node, as kgo picks). The console asks its own node,
// whose view of the partition owners its pages follow: a node picked at
// random may be one whose view lags, and name a node that no longer
// coordinates the group, or one the client does not know. broker is the
// handle each coordinator is asked through (nil: cl.Broker). A failure to
// ask a coordinator is a *CoordinatorError.
func DescribeAt(ctx context.Context, cl *kgo.Client, finder *kgo.Broker, broker func(node int32) *kgo.Broker, ids []string, l Limits) ([]kmsg.DescribeGroupsResponseGroup, error) {
	if broker == nil {
		broker = func(node int32) *kgo.Broker { return cl.Broker(int(node)) }
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = ids
	var fresp *kmsg.FindCoordinatorResponse
	if finder == nil {
		r, err := fc.RequestWith(ctx, cl)
		if err != nil {
			return nil, err
		}
		fresp = r
	} else {
		r, err := finder.Request(ctx, fc)
		if err != nil {
			return nil, err
		}
		fresp = r.(*kmsg.FindCoordinatorResponse)
	}
	var out []kmsg.DescribeGroupsResponseGroup
	byNode := map[int32][]string{}
	var order []int32
	for _, c := range fresp.Coordinators {
		if c.ErrorCode != 0 {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode, d.ErrorMessage = c.Key, c.ErrorCode, c.ErrorMessage
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
		group.RequestHistory(req, l.Events)
		if l.Lists >= 0 {
			group.RequestHistoryLists(req, l.Lists)
		}
		if l.Members >= 0 {
			group.RequestMembers(req, l.Members)
		}
		resp, err := broker(node).Request(ctx, req)
		if err != nil {
			return nil, &CoordinatorError{Node: node, Err: err}
		}
		out = append(out, resp.(*kmsg.DescribeGroupsResponse).Groups...)
	}
	return out, nil
}

// CoordinatorError is DescribeAt's failure to ask the coordinator Node: a
// caller tells from it which node, and why (Err).
type CoordinatorError struct {
	Node int32
	Err  error
}

func (e *CoordinatorError) Error() string {
	return fmt.Sprintf("DescribeGroups at the coordinator (node %d): %v", e.Node, e.Err)
}

func (e *CoordinatorError) Unwrap() error { return e.Err }
