package coordinator

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/store/memstore"
)

// BenchmarkOffsetCommit measures the coordinator's own path for a simple
// OffsetCommit (no network, no server front end) on the in-memory store:
// the partition's handler, the committer's round and the reply, from
// Handle to its return, with parallel committers each on its own group.
//
//	go test -run '^$' -bench OffsetCommit -benchmem ./coordinator/
func BenchmarkOffsetCommit(b *testing.B) {
	for _, parts := range []int{1, 50} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			c, err := New(Config{Store: memstore.New(), Group: group.Defaults()})
			if err != nil {
				b.Fatal(err)
			}
			c.Start()
			defer c.Close()
			if err := c.WaitLoaded(context.Background()); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Version = 8
				req.Group, req.Generation = fmt.Sprintf("bench-%d", n.Add(1)), -1
				t := kmsg.NewOffsetCommitRequestTopic()
				t.Topic = "topic"
				for p := range parts {
					pp := kmsg.NewOffsetCommitRequestTopicPartition()
					pp.Partition = int32(p)
					t.Partitions = append(t.Partitions, pp)
				}
				req.Topics = []kmsg.OffsetCommitRequestTopic{t}
				for i := int64(0); pb.Next(); i++ {
					for j := range req.Topics[0].Partitions {
						req.Topics[0].Partitions[j].Offset = i
					}
					resp, err := c.Handle(context.Background(), group.Client{ID: "bench"}, req)
					if err != nil {
						b.Fatal(err)
					}
					if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
						b.Fatalf("error %d", code)
					}
				}
			})
		})
	}
}
