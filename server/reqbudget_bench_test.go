package server

import (
	"fmt"
	rtmetrics "runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkAmplifiedRequests: conns connections each send at once a 4 MB
// Metadata v4 request of two million empty topic names (each 2 bytes on the
// wire, a 40-byte struct decoded), the worst kind of request for memory per
// byte found; it reports the peaks of the heap and of the live heap the
// collector marked while they are served, and the time to serve them all,
// with and without the request budget.
//
//	go test -run '^$' -bench AmplifiedRequests -benchtime 1x ./server/
func BenchmarkAmplifiedRequests(b *testing.B) {
	const conns, names = 16, 2_000_000
	empty := ""
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4
	req.Topics = make([]kmsg.MetadataRequestTopic, names)
	for i := range req.Topics {
		req.Topics[i].Topic = &empty
	}
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, 7)
	req = nil
	for _, budget := range []int64{-1, 32 << 20, DefaultMaxInflightRequestBytes, 8 << 20} {
		name := "budget=none"
		if budget > 0 {
			name = fmt.Sprintf("budget=%dMiB", budget>>20)
		}
		b.Run(name, func(b *testing.B) {
			ts := startServer(b, func(c *Config) { c.MaxInflightRequestBytes = budget })
			var peak, live uint64
			for range b.N {
				cs := make([]*rawConn, conns)
				for i := range cs {
					cs[i] = ts.dial(b)
					cs[i].nc.SetDeadline(time.Now().Add(5 * time.Minute))
				}
				stop, sampled := make(chan struct{}), make(chan [2]uint64)
				go func() { sampled <- samplePeakHeap(stop) }()
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Go(func() {
						c.writeRaw(frame)
						if _, _, err := c.recvFrame(); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				close(stop)
				p := <-sampled
				peak, live = max(peak, p[0]), max(live, p[1])
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(live)/(1<<20), "peak-live-MiB")
			b.ReportMetric(float64(len(frame)*conns)/(1<<20), "sent-MiB")
		})
	}
}

// samplePeakHeap returns the largest heap of objects (live or not yet
// collected) and the largest live heap the collector marked, sampled every
// millisecond until stop is closed.
func samplePeakHeap(stop chan struct{}) [2]uint64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var peak [2]uint64
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		rtmetrics.Read(s)
		peak[0], peak[1] = max(peak[0], s[0].Value.Uint64()), max(peak[1], s[1].Value.Uint64())
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}
