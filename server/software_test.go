package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// softwareGauge returns the client_software_connections series as
// "name/version=count", sorted.
func softwareGauge(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "cohort_server_client_software_connections" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, fmt.Sprintf("%s/%s=%v", l["client_software_name"], l["client_software_version"], m.GetGauge().GetValue()))
		}
	}
	return strings.Join(out, " ")
}

func sendApiVersions(t *testing.T, c *rawConn, v int16, name, version string) *kmsg.ApiVersionsResponse {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(v)
	req.ClientSoftwareName, req.ClientSoftwareVersion = name, version
	return c.roundTrip(req).(*kmsg.ApiVersionsResponse)
}

// Open connections are counted by the client software they name in
// ApiVersions v3+ (KIP-511), "unknown" before that or when they never do
// (v0-2); a malformed name is refused and changes nothing; a pair's series
// goes with its last connection.
func TestClientSoftwareConnections(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, withRegistry(reg))
	a, b, old := ts.dial(t), ts.dial(t), ts.dial(t)
	sendApiVersions(t, a, 3, "franz-go", "1.22.3")
	sendApiVersions(t, b, 4, "franz-go", "1.22.3")
	sendApiVersions(t, old, 0, "", "")
	want := "franz-go/1.22.3=2 unknown/unknown=1"
	if !testwait.Until(5*time.Second, func() bool { return softwareGauge(t, reg) == want }) {
		t.Fatalf("after three connections: %q, want %q", softwareGauge(t, reg), want)
	}
	if r := sendApiVersions(t, old, 3, "bad name!", "1"); r.ErrorCode != errInvalidRequest {
		t.Fatalf("malformed software name: error %d", r.ErrorCode)
	}
	sendApiVersions(t, b, 3, "librdkafka", "2.11.1") // a connection may name itself again
	want = "franz-go/1.22.3=1 librdkafka/2.11.1=1 unknown/unknown=1"
	if got := softwareGauge(t, reg); got != want {
		t.Fatalf("after renaming: %q, want %q", got, want)
	}
	a.nc.Close()
	want = "librdkafka/2.11.1=1 unknown/unknown=1"
	if !testwait.Until(5*time.Second, func() bool { return softwareGauge(t, reg) == want }) {
		t.Fatalf("after the last franz-go connection closed: %q, want %q", softwareGauge(t, reg), want)
	}
}

// Any client may name any software before it authenticates: beyond 100
// distinct pairs, and for a name or version over 64 bytes, connections are
// counted as "other", so the series stay bounded.
func TestClientSoftwareConnectionsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, withRegistry(reg))
	for i := range maxSoftwareSeries + 5 {
		sendApiVersions(t, ts.dial(t), 3, fmt.Sprintf("client-%d", i), "1")
	}
	sendApiVersions(t, ts.dial(t), 3, "x"+strings.Repeat("y", maxSoftwareLabel), "1")
	sendApiVersions(t, ts.dial(t), 3, "client-0", "1") // a pair already counted is still its own
	var n int
	var other, zero float64
	done := testwait.Until(5*time.Second, func() bool {
		other = testutil.ToFloat64(ts.srv.metrics.software.vec.WithLabelValues("other", "other"))
		zero = testutil.ToFloat64(ts.srv.metrics.software.vec.WithLabelValues("client-0", "1"))
		n = testutil.CollectAndCount(ts.srv.metrics.software.vec)
		return other == 6 && zero == 2
	})
	if !done || n != maxSoftwareSeries+1 {
		t.Fatalf("series %d (want %d), other %v (want 6), client-0 %v (want 2)", n, maxSoftwareSeries+1, other, zero)
	}
}

// Once a connection has named its client software, its log lines carry it:
// an operator reading "refusing Produce" (or a bad request) learns which
// library sent it. A connection that never names it logs without; one that
// names itself again logs the latest pair, and a name over 64 bytes is
// logged as "other", as the gauge counts it.
func TestClientSoftwareInConnectionLog(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	ts := startDataPlane(t, func(c *Config) { c.Logger = log })
	named, anon, renamed, long := ts.dial(t), ts.dial(t), ts.dial(t), ts.dial(t)
	sendApiVersions(t, named, 3, "franz-go", "1.22.3")
	named.roundTrip(produceReq(8, -1, dpTopic, 0, 1))
	anon.roundTrip(produceReq(8, -1, dpTopic, 0, 1))
	sendApiVersions(t, renamed, 3, "sarama", "1.61.1")
	sendApiVersions(t, renamed, 3, "librdkafka", "2.11.1")
	renamed.roundTrip(produceReq(8, -1, dpTopic, 0, 1))
	sendApiVersions(t, long, 3, strings.Repeat("a", maxSoftwareLabel+1), "1")
	long.roundTrip(produceReq(8, -1, dpTopic, 0, 1))
	mu.Lock()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	mu.Unlock()
	count := map[string]int{}
	for _, l := range lines {
		if !strings.Contains(l, "refusing Produce") {
			continue
		}
		_, sw, _ := strings.Cut(l, "client_software=")
		sw, _, _ = strings.Cut(sw, " client_id=") // (the line's own attributes follow the connection's)
		count[sw]++
	}
	want := map[string]int{
		"franz-go client_software_version=1.22.3": 1,
		"": 1,
		"librdkafka client_software_version=2.11.1": 1,
		"other client_software_version=other":       1,
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("refusal lines by software %v, want %v:\n%s", count, want, strings.Join(lines, "\n"))
	}
}
