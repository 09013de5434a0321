package server

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxListEntries is the most entries a request may list in the lists whose
// every entry costs the server far more memory than its bytes on the wire:
// the groups of DescribeGroups, ConsumerGroupDescribe, OffsetFetch (v8+) and
// DeleteGroups, the keys of FindCoordinator, the members of LeaveGroup, the
// resources of DescribeConfigs, the filters of ListGroups, the subscribed
// topic names of ConsumerGroupHeartbeat and the protocols of JoinGroup. An entry can
// be a single byte (an empty group id) and its answer, with the work of
// routing it to its coordinator partition, takes hundreds of bytes, so a
// 1 MB request of empty ids held ~0.8 GB and a 5 MB one ran a node out of
// memory. 100,000 groups still fit one request (an operator tool describing
// every group of a node with 100,000 groups); Kafka sets no such bound.
const maxListEntries = 100_000

// DefaultMaxRequestPartitions is Config.MaxRequestPartitions's default: the
// most partitions a request may name over all its topics (and groups), in
// the requests that answer every partition named: OffsetFetch, OffsetCommit,
// OffsetDelete, TxnOffsetCommit, Fetch, ListOffsets and
// OffsetForLeaderEpoch. Each partition is four bytes on the wire and an
// answer entry of tens to hundreds of bytes, built while the group's
// coordinator partition serves nothing else: one 40 MB OffsetFetch naming 10
// million partitions of a topic took the node to 2 GB and stalled every group
// of its coordinator partition for 13 s. A million is the default bound on
// the partitions of all topics (node.DefaultMaxPartitions), so a consumer
// naming every partition of a full catalog fits; a node allowing more
// partitions allows as many here (node sets it). Kafka sets no such bound.
const DefaultMaxRequestPartitions = 1_000_000

// checkEntries returns an error naming the list of req that holds more
// than maxListEntries entries, or the partitions past maxParts (negative:
// no bound); the connection is then closed as for any other malformed
// request.
func checkEntries(req kmsg.Request, maxParts int64) error {
	if maxParts >= 0 {
		if n := partitionEntries(req, maxParts); n > maxParts {
			return fmt.Errorf("%s names %d partitions, more than the %d a request may hold", kmsg.NameForKey(req.Key()), n, maxParts)
		}
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
	case *kmsg.ConsumerGroupHeartbeatRequest:
		// Every name is matched and kept with the member, and each target
		// computation of its group goes over them: a join with a million
		// names held its partition 3.5 s, and every later join 5 s.
		what, n = "subscribed topic names", len(r.SubscribedTopicNames)
	case *kmsg.JoinGroupRequest:
		what, n = "protocols", len(r.Protocols)
	}
	if n > maxListEntries {
		return fmt.Errorf("%s lists %d %s, more than the %d a request may hold", kmsg.NameForKey(req.Key()), n, what, maxListEntries)
	}
	return nil
}

// partitionEntries counts the partitions req names (0 for requests that name
// none). It stops counting once past most.
func partitionEntries(req kmsg.Request, most int64) int64 {
	switch r := req.(type) {
	case *kmsg.OffsetFetchRequest:
		n := total(r.Topics, most, func(t *kmsg.OffsetFetchRequestTopic) int { return len(t.Partitions) })
		for i := 0; i < len(r.Groups) && n <= most; i++ {
			n += total(r.Groups[i].Topics, most, func(t *kmsg.OffsetFetchRequestGroupTopic) int { return len(t.Partitions) })
		}
		return n
	case *kmsg.OffsetCommitRequest:
		return total(r.Topics, most, func(t *kmsg.OffsetCommitRequestTopic) int { return len(t.Partitions) })
	case *kmsg.OffsetDeleteRequest:
		return total(r.Topics, most, func(t *kmsg.OffsetDeleteRequestTopic) int { return len(t.Partitions) })
	case *kmsg.TxnOffsetCommitRequest:
		return total(r.Topics, most, func(t *kmsg.TxnOffsetCommitRequestTopic) int { return len(t.Partitions) })
	case *kmsg.FetchRequest:
		return total(r.Topics, most, func(t *kmsg.FetchRequestTopic) int { return len(t.Partitions) }) +
			total(r.ForgottenTopics, most, func(t *kmsg.FetchRequestForgottenTopic) int { return len(t.Partitions) })
	case *kmsg.ListOffsetsRequest:
		return total(r.Topics, most, func(t *kmsg.ListOffsetsRequestTopic) int { return len(t.Partitions) })
	case *kmsg.OffsetForLeaderEpochRequest:
		return total(r.Topics, most, func(t *kmsg.OffsetForLeaderEpochRequestTopic) int { return len(t.Partitions) })
	case *kmsg.ConsumerGroupHeartbeatRequest: // the partitions the member owns
		return total(r.Topics, most, func(t *kmsg.ConsumerGroupHeartbeatRequestTopic) int { return len(t.Partitions) })
	}
	return 0
}

// total sums parts over ts, stopping once past most.
func total[T any](ts []T, most int64, parts func(*T) int) int64 {
	var n int64
	for i := 0; i < len(ts) && n <= most; i++ {
		n += int64(parts(&ts[i]))
	}
	return n
}
