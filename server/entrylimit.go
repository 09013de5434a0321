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

// maxPartitionEntries is the most partitions a request may name over all its
// topics (and groups), in the requests that answer every partition named:
// OffsetFetch, OffsetCommit, OffsetDelete, TxnOffsetCommit, Fetch,
// ListOffsets and OffsetForLeaderEpoch. Each partition is four bytes on the
// wire and an answer entry of tens to hundreds of bytes, built while the
// group's coordinator partition serves nothing else: one 40 MB OffsetFetch
// naming 10 million partitions of a topic took the node to 2 GB and stalled
// every group of its coordinator partition for 13 s. A million is the node's
// default bound on the partitions of all topics (--max-partitions), so a
// consumer naming every partition of a full catalog still fits; Kafka sets
// no such bound.
const maxPartitionEntries = 1_000_000

// checkEntries returns an error naming the list of req that holds more
// than maxListEntries entries, or the partitions past maxPartitionEntries;
// the connection is then closed as for any other malformed request.
func checkEntries(req kmsg.Request) error {
	if n := partitionEntries(req); n > maxPartitionEntries {
		return fmt.Errorf("%s names %d partitions, more than the %d a request may hold", kmsg.NameForKey(req.Key()), n, maxPartitionEntries)
	}
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

// partitionEntries counts the partitions req names (0 for requests that name
// none). It stops counting once past maxPartitionEntries.
func partitionEntries(req kmsg.Request) int {
	switch r := req.(type) {
	case *kmsg.OffsetFetchRequest:
		n := total(r.Topics, func(t *kmsg.OffsetFetchRequestTopic) int { return len(t.Partitions) })
		for i := 0; i < len(r.Groups) && n <= maxPartitionEntries; i++ {
			n += total(r.Groups[i].Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) int { return len(t.Partitions) })
		}
		return n
	case *kmsg.OffsetCommitRequest:
		return total(r.Topics, func(t *kmsg.OffsetCommitRequestTopic) int { return len(t.Partitions) })
	case *kmsg.OffsetDeleteRequest:
		return total(r.Topics, func(t *kmsg.OffsetDeleteRequestTopic) int { return len(t.Partitions) })
	case *kmsg.TxnOffsetCommitRequest:
		return total(r.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) int { return len(t.Partitions) })
	case *kmsg.FetchRequest:
		return total(r.Topics, func(t *kmsg.FetchRequestTopic) int { return len(t.Partitions) }) +
			total(r.ForgottenTopics, func(t *kmsg.FetchRequestForgottenTopic) int { return len(t.Partitions) })
	case *kmsg.ListOffsetsRequest:
		return total(r.Topics, func(t *kmsg.ListOffsetsRequestTopic) int { return len(t.Partitions) })
	case *kmsg.OffsetForLeaderEpochRequest:
		return total(r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) int { return len(t.Partitions) })
	}
	return 0
}

// total sums parts over ts, stopping once past maxPartitionEntries.
func total[T any](ts []T, parts func(*T) int) int {
	n := 0
	for i := 0; i < len(ts) && n <= maxPartitionEntries; i++ {
		n += parts(&ts[i])
	}
	return n
}
