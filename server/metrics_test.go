package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testMetrics(t testing.TB) (*metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg, []Listener{{Name: "PLAINTEXT", Protocol: ProtocolPlaintext}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// commitResponse is an OffsetCommit answer of n partitions, bad of them
// with an error.
func commitResponse(n, bad int) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	topic := kmsg.NewOffsetCommitResponseTopic()
	topic.Topic = "t"
	for i := range n {
		p := kmsg.NewOffsetCommitResponseTopicPartition()
		p.Partition = int32(i)
		if i < bad {
			p.ErrorCode = 25 // UNKNOWN_MEMBER_ID
		}
		topic.Partitions = append(topic.Partitions, p)
	}
	resp.Topics = append(resp.Topics, topic)
	return resp
}

// TestObserveCounts: requests, latency, error codes by name (a code
// outside the cached range counts as UNKNOWN_SERVER_ERROR) and offsets
// committed.
func TestObserveCounts(t *testing.T) {
	m, reg := testMetrics(t)
	hb := kmsg.NewPtrHeartbeatResponse()
	m.observe(keyHeartbeat, hb, time.Millisecond)
	hb.ErrorCode = 27 // REBALANCE_IN_PROGRESS
	m.observe(keyHeartbeat, hb, time.Millisecond)
	hb.ErrorCode = 30000
	m.observe(keyHeartbeat, hb, time.Millisecond)
	m.observe(keyOffsetCommit, commitResponse(5, 2), time.Millisecond)
	if v := testutil.ToFloat64(m.requests[keyHeartbeat]); v != 3 {
		t.Errorf("heartbeats %v", v)
	}
	for _, tc := range []struct {
		api, err string
		want     float64
	}{{"Heartbeat", "REBALANCE_IN_PROGRESS", 1}, {"Heartbeat", "UNKNOWN_SERVER_ERROR", 1}, {"OffsetCommit", "UNKNOWN_MEMBER_ID", 2}} {
		if v := testutil.ToFloat64(m.errVec.WithLabelValues(tc.api, tc.err)); v != tc.want {
			t.Errorf("errors %s %s: %v, want %v", tc.api, tc.err, v, tc.want)
		}
	}
	if v := testutil.ToFloat64(m.offsets); v != 3 {
		t.Errorf("offsets committed %v, want 3", v)
	}
	if n, err := testutil.GatherAndCount(reg, "cohort_server_request_errors_total"); err != nil || n != 3 {
		t.Errorf("%d error series (%v), want 3", n, err)
	}
}

// TestObserveAllocatesNothing: counting a request, its latency and its
// error codes allocates nothing once the error's child exists.
func TestObserveAllocatesNothing(t *testing.T) {
	m, _ := testMetrics(t)
	hb := kmsg.NewPtrHeartbeatResponse()
	hb.ErrorCode = 27
	commit := commitResponse(50, 1)
	m.observe(keyHeartbeat, hb, time.Millisecond)
	m.observe(keyOffsetCommit, commit, time.Millisecond)
	if a := testing.AllocsPerRun(1000, func() {
		m.observe(keyHeartbeat, hb, 30*time.Microsecond)
		m.observe(keyOffsetCommit, commit, 2*time.Millisecond)
	}); a != 0 {
		t.Errorf("%v allocations per observe", a)
	}
}

// BenchmarkObserve is the metrics' cost per answered request: a Heartbeat,
// and an OffsetCommit of 50 partitions.
func BenchmarkObserve(b *testing.B) {
	m, _ := testMetrics(b)
	hb := kmsg.NewPtrHeartbeatResponse()
	commit := commitResponse(50, 0)
	b.Run("Heartbeat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.observe(keyHeartbeat, hb, 30*time.Microsecond)
		}
	})
	b.Run("OffsetCommit50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.observe(keyOffsetCommit, commit, 2*time.Millisecond)
		}
	})
}
