// Package testkafka holds Kafka-protocol steps that tests of several
// packages share.
package testkafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// OffsetFetchRequest asks for the committed offsets of partitions
// 0..partitions-1 of topic in group.
func OffsetFetchRequest(group, topic string, partitions int32) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = []kmsg.OffsetFetchRequestTopic{rt}
	return req
}

// SimpleCommitRequest commits offset for partition of topic in group as a
// simple commit: no member, generation -1 (what a client that assigns its
// partitions itself sends).
func SimpleCommitRequest(group, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// FetchOffsets asks for the committed offsets of partitions 0..partitions-1
// of topic in group, again until the answer has no error (at any level) (a partition may
// still be loading or moving after a crash or failover), each try bounded by
// 5 s and all of them by within; it fails the test when no answer came.
func FetchOffsets(t testing.TB, cl kmsg.Requestor, group, topic string, partitions int32, within time.Duration) *kmsg.OffsetFetchResponse {
	t.Helper()
	req := OffsetFetchRequest(group, topic, partitions)
	var resp *kmsg.OffsetFetchResponse
	var err error
	if !testwait.Until(within, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err = req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 {
			return false
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("fetching offsets of %s: %v %v", group, err, resp)
	}
	return resp
}
