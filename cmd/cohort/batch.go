package main

import (
	"context"
	"maps"

	"github.com/twmb/franz-go/pkg/kadm"
)

// groupBatch is the most groups one request of the CLI names (DescribeGroups,
// ConsumerGroupDescribe, OffsetFetch, DeleteGroups). A node refuses a
// request naming more than 100,000 groups by closing the connection, so a
// command over every group of a node holding more (group describe
// --all-groups, topic delete --dry-run) asks in batches; smaller batches
// also keep each answer, built while the group's coordinator partition
// serves nothing else, small.
var groupBatch = 1000 // a variable for tests

// inBatches calls fn with ids cut into consecutive slices of at most
// groupBatch ids, in order.
func inBatches(ids []string, fn func(batch []string)) {
	for len(ids) > 0 {
		n := min(len(ids), groupBatch)
		fn(ids[:n])
		ids = ids[n:]
	}
}

// fetchManyOffsets is adm.FetchManyOffsets of ids, asked in batches.
func fetchManyOffsets(ctx context.Context, adm *kadm.Client, ids []string) kadm.FetchOffsetsResponses {
	out := kadm.FetchOffsetsResponses{}
	inBatches(ids, func(batch []string) { maps.Copy(out, adm.FetchManyOffsets(ctx, batch...)) })
	return out
}
