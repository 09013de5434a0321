package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkCreateTopics: one CreateTopics of 1,000 topics (12 partitions
// each) to a node on the embedded disk store whose catalog already holds
// `have` topics, the way a deployment mirroring a data cluster creates them.
// Reported per topic created; the node's catalog writes each topic's record
// (and its fsync) once, so the cost should barely grow with `have`.
//
//	go test -run '^$' -bench CreateTopics -benchtime 3x ./node/
func BenchmarkCreateTopics(b *testing.B) {
	for _, have := range []int{0, 5000} {
		b.Run(fmt.Sprintf("have=%d", have), func(b *testing.B) {
			nd := startLoaded(b, Config{Listen: "127.0.0.1:0", DataDir: b.TempDir(), Partitions: 5,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			defer nd.Close()
			for i := range have {
				if _, err := nd.Catalog().Create(fmt.Sprintf("have-%06d", i), 12, nil); err != nil {
					b.Fatal(err)
				}
			}
			cl := client(b, nd.Addr())
			const batch = 1000
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := kmsg.NewPtrCreateTopicsRequest()
				req.TimeoutMillis = 60000
				for j := range batch {
					rt := kmsg.NewCreateTopicsRequestTopic()
					rt.Topic = fmt.Sprintf("new-%03d-%04d", i, j)
					rt.NumPartitions, rt.ReplicationFactor = 12, 1
					req.Topics = append(req.Topics, rt)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				resp, err := req.RequestWith(ctx, cl)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				for _, rt := range resp.Topics {
					if rt.ErrorCode != 0 {
						b.Fatalf("topic %s: error %d", rt.Topic, rt.ErrorCode)
					}
				}
				b.StopTimer() // put the catalog back to `have` topics
				for _, rt := range resp.Topics {
					if err := nd.Catalog().Delete(rt.Topic); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch)/1e3, "µs/topic")
		})
	}
}
