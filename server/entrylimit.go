package server

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxListEntries is the most entries a request may list in the lists whose
// every entry costs the server far more memory than its bytes on the wire:
// the groups of DescribeGroups, ConsumerGroupDescribe, OffsetFetch (v8+) and
// DeleteGroups, the keys of FindCoordinator, the members of LeaveGroup, the
// resources of DescribeConfigs and the filters of ListGroups. An entry can
// be a single byte (an empty group id) and its answer, with the work of
// routing it to its coordinator partition, takes hundreds of bytes, so a
// 1 MB request of empty ids held ~0.8 GB and a 5 MB one ran a node out of
// memory. 100,000 groups still fit one request (an operator tool describing
// every group of a node with 100,000 groups); Kafka sets no such bound.
const maxListEntries = 100_000

// checkEntries returns an error naming the list of req that holds more
// than maxListEntries entries; the connection is then closed as for any
// other malformed request.
func checkEntries(req kmsg.Request) error {
	var what string
	n := 0
	switch r := req.(type) {
	case *kmsg.DescribeGroupsRequest:
		what, n = "groups", len(r.Groups)
	case *kmsg.ConsumerGroupDescribeRequest:
		what, n = "groups", len(r.Groups)
	case *kmsg.OffsetFetchRequest:
		what, n = "groups", len(r.Groups)
	case *kmsg.DeleteGroupsRequest:
		what, n = "groups", len(r.Groups)
	case *kmsg.FindCoordinatorRequest:
		what, n = "coordinator keys", len(r.CoordinatorKeys)
	case *kmsg.LeaveGroupRequest:
		what, n = "members", len(r.Members)
	case *kmsg.DescribeConfigsRequest:
		what, n = "resources", len(r.Resources)
	case *kmsg.ListGroupsRequest:
		what, n = "filters", len(r.StatesFilter)+len(r.TypesFilter)
	}
	if n > maxListEntries {
		return fmt.Errorf("%s lists %d %s, more than the %d a request may hold", kmsg.NameForKey(req.Key()), n, what, maxListEntries)
	}
	return nil
}
