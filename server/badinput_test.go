package server

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkStillServing asserts a fresh connection still gets answers.
func checkStillServing(t *testing.T, ts *testServer) {
	t.Helper()
	resp := ts.dial(t).roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("server no longer serving: ApiVersions error %d", resp.ErrorCode)
	}
}

func TestBadFramesCloseTheConnection(t *testing.T) {
	ts := startServer(t, withMaxFrame(1024))
	hbBody := kmsg.NewPtrHeartbeatRequest().AppendTo(nil)
	sizeOnly := func(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
	cases := map[string][]byte{
		"negative size":       sizeOnly(-5),
		"oversized frame":     sizeOnly(1025),
		"huge frame":          sizeOnly(1 << 30),
		"truncated header":    append(sizeOnly(3), 0, 12, 0),
		"client id past end":  append(sizeOnly(10), 0, 12, 0, 0, 0, 0, 0, 1, 0, 50),
		"unknown key":         frame(1000, 0, 1, "x", nil),
		"produce":             frame(0, 9, 1, "x", nil),
		"negative key":        frame(-3, 0, 1, "x", nil),
		"version too high":    frame(12, 5, 1, "x", hbBody),
		"version too low":     frame(8, 1, 1, "x", nil), // OffsetCommit v0-1 not served
		"negative version":    frame(12, -1, 1, "x", hbBody),
		"garbage body":        frame(11, 5, 1, "x", []byte{0xff, 0xff, 0xff}),
		"empty body":          frame(12, 3, 1, "x", nil),
		"flexible, no tags":   frame(12, 4, 1, "x", nil),
		"metadata huge array": frame(3, 1, 1, "x", []byte{0x7f, 0xff, 0xff, 0xff}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := ts.dial(t)
			c.writeRaw(b)
			c.expectClosed()
			checkStillServing(t, ts)
		})
	}
	if n := len(ts.groups.snapshot()); n != 0 {
		t.Fatalf("bad frames reached Groups %d times", n)
	}
}

func TestFrameSizeLimitIsInclusive(t *testing.T) {
	const limit = 200
	ts := startServer(t, withMaxFrame(limit))
	sized := func(n int) (*kmsg.HeartbeatRequest, []byte) {
		req := kmsg.NewPtrHeartbeatRequest()
		req.SetVersion(0)
		base := len(frame(12, 0, 1, "", req.AppendTo(nil))) - 4
		req.Group = strings.Repeat("g", n-base) // grow the frame to n bytes
		f := frame(12, 0, 1, "", req.AppendTo(nil))
		if len(f)-4 != n {
			t.Fatalf("built a %d-byte frame, want %d", len(f)-4, n)
		}
		return req, f
	}
	req, f := sized(limit)
	c := ts.dial(t)
	c.writeRaw(f)
	c.recv(req, 1)
	_, f = sized(limit + 1)
	c.writeRaw(f)
	c.expectClosed()
}

func TestGroupsErrorsCloseTheConnection(t *testing.T) {
	ts := startServer(t)
	cases := map[string]func(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error){
		"error": func(context.Context, Client, kmsg.Request) (kmsg.Response, error) {
			return nil, errors.New("coordinator broke")
		},
		"nil response": func(context.Context, Client, kmsg.Request) (kmsg.Response, error) { return nil, nil },
		"wrong key": func(context.Context, Client, kmsg.Request) (kmsg.Response, error) {
			return kmsg.NewPtrSyncGroupResponse(), nil
		},
		"wrong version": func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
			resp := req.ResponseKind()
			resp.SetVersion(req.GetVersion() + 1)
			return resp, nil
		},
		"panic": func(context.Context, Client, kmsg.Request) (kmsg.Response, error) { panic("coordinator bug") },
	}
	for name, hook := range cases {
		t.Run(name, func(t *testing.T) {
			ts.groups.mu.Lock()
			ts.groups.hook = hook
			ts.groups.mu.Unlock()
			c := ts.dial(t)
			c.send(kmsg.NewPtrHeartbeatRequest(), 1)
			c.expectClosed()
			checkStillServing(t, ts)
		})
	}
}

func TestSegmentioKafkaGoReadsCatalog(t *testing.T) {
	ts := startServer(t)
	createTopic(t, ts.srv.Catalog(), "orders", 3, nil)
	createTopic(t, ts.srv.Catalog(), "audit", 1, nil)
	ctx := testCtx(t)

	conn, err := kafka.DialContext(ctx, "tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions("orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("%d partitions of orders, want 3", len(parts))
	}
	for _, p := range parts {
		if p.Topic != "orders" || p.Leader.ID != 0 || p.Leader.Port != int(ts.topo.Self().Port) {
			t.Errorf("partition %+v", p)
		}
	}
	if all, err := conn.ReadPartitions(); err != nil || len(all) != 4 {
		t.Fatalf("all partitions: %d, %v; want 4", len(all), err)
	}

	cl := &kafka.Client{Addr: kafka.TCP(ts.addr)}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"audit", "ghost"}})
	if err != nil {
		t.Fatal(err)
	}
	if md.ClusterID != "test-cluster" || len(md.Topics) != 2 {
		t.Fatalf("metadata %+v", md)
	}
	for _, tp := range md.Topics {
		switch tp.Name {
		case "audit":
			if tp.Error != nil || len(tp.Partitions) != 1 {
				t.Errorf("audit: %+v", tp)
			}
		case "ghost":
			if !errors.Is(tp.Error, kafka.UnknownTopicOrPartition) {
				t.Errorf("ghost: error %v, want UnknownTopicOrPartition", tp.Error)
			}
		}
	}
}

// TestTooManyEntriesCloseTheConnection: a request listing more than
// maxListEntries groups (or keys, members, resources, filters) is closed as
// a bad request before any of it is served, and counted; one at the limit
// is served. (A 1 MB DescribeGroups of a million empty group ids held
// ~0.8 GB of memory, and 5 MB ran a node out of memory.)
func TestTooManyEntriesCloseTheConnection(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startServer(t, withRegistry(reg))
	ids := func(n int) []string { return make([]string, n) } // empty ids: one byte each on the wire
	for _, tc := range []struct {
		name string
		req  func(n int) kmsg.Request
	}{
		{"DescribeGroups", func(n int) kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Version, r.Groups = 5, ids(n)
			return r
		}},
		{"ConsumerGroupDescribe", func(n int) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = ids(n)
			return r
		}},
		{"OffsetFetch", func(n int) kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Groups = 8, make([]kmsg.OffsetFetchRequestGroup, n)
			return r
		}},
		{"DeleteGroups", func(n int) kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Version, r.Groups = 2, ids(n)
			return r
		}},
		{"FindCoordinator", func(n int) kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version, r.CoordinatorKeys = 4, ids(n)
			return r
		}},
		{"LeaveGroup", func(n int) kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Version, r.Group, r.Members = 5, "g", make([]kmsg.LeaveGroupRequestMember, n)
			return r
		}},
		{"DescribeConfigs", func(n int) kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			r.Version, r.Resources = 4, make([]kmsg.DescribeConfigsRequestResource, n)
			return r
		}},
		{"ListGroups", func(n int) kmsg.Request {
			r := kmsg.NewPtrListGroupsRequest()
			r.Version, r.StatesFilter = 4, ids(n)
			return r
		}},
		{"ConsumerGroupHeartbeat", func(n int) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.SubscribedTopicNames = "g", ids(n)
			return r
		}},
		{"JoinGroup", func(n int) kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Version, r.Group, r.ProtocolType, r.Protocols = 5, "g", "consumer", make([]kmsg.JoinGroupRequestProtocol, n)
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dial(t)
			c.send(tc.req(maxListEntries+1), 1)
			c.expectClosed()
			checkStillServing(t, ts)
		})
	}
	if n := len(ts.groups.snapshot()); n != 0 {
		t.Fatalf("refused requests reached Groups %d times", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, mf := range mfs {
		if mf.GetName() != "cohort_server_protocol_errors_total" {
			continue
		}
		for _, m := range mf.Metric {
			if m.Label[0].GetValue() == "too_many_entries" {
				got = m.Counter.GetValue()
			}
		}
	}
	if got != 10 {
		t.Errorf("too_many_entries counted %v times, want 10", got)
	}
	// At the limit the request is served.
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version, r.Groups = 5, ids(maxListEntries)
	if _, ok := ts.dial(t).roundTrip(r).(*kmsg.DescribeGroupsResponse); !ok {
		t.Fatal("a DescribeGroups at the limit was not answered")
	}
}

// TestTooManyPartitionsCloseTheConnection: a request naming more partitions
// over its topics (and groups) than Config.MaxRequestPartitions is closed as
// a bad request before any of it is served; one at the bound is served. (A
// 40 MB OffsetFetch of 10 million partitions took a node to 2 GB and stalled
// its coordinator partition for 13 s.) A small bound keeps the frames small;
// TestRequestPartitionBound checks the default's arithmetic.
func TestTooManyPartitionsCloseTheConnection(t *testing.T) {
	const bound = 100
	ts := startServer(t, func(c *Config) { c.MaxRequestPartitions = bound })
	parts := func(n int) []int32 { return make([]int32, n) }
	half := bound / 2
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"OffsetFetch v7", func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version, r.Group = 7, "g"
			r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: parts(half)}, {Topic: "b", Partitions: parts(half + 1)}}
			return r
		}()},
		{"OffsetFetch v8 across groups", func() kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Version = 8
			r.Groups = []kmsg.OffsetFetchRequestGroup{
				{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: parts(half)}}},
				{Group: "h", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "a", Partitions: parts(half + 1)}}},
			}
			return r
		}()},
		{"OffsetCommit", func() kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Version, r.Group, r.Generation = 8, "g", -1
			r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "a", Partitions: make([]kmsg.OffsetCommitRequestTopicPartition, bound+1)}}
			return r
		}()},
		{"ListOffsets", func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			r.Version = 7
			r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "a", Partitions: make([]kmsg.ListOffsetsRequestTopicPartition, bound+1)}}
			return r
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dial(t)
			c.send(tc.req, 1)
			c.expectClosed()
			checkStillServing(t, ts)
		})
	}
	if n := len(ts.groups.snapshot()); n != 0 {
		t.Fatalf("refused requests reached Groups %d times", n)
	}
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version, r.Group = 7, "g"
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "a", Partitions: parts(bound)}}
	if _, ok := ts.dial(t).roundTrip(r).(*kmsg.OffsetFetchResponse); !ok {
		t.Fatal("an OffsetFetch at the bound was not answered")
	}
}

// TestRequestPartitionBound: the default bound is a million partitions, a
// request naming one more is refused and one at it is not, and a negative
// bound lifts it (decoded requests, no network: the frames would be tens of
// megabytes).
func TestRequestPartitionBound(t *testing.T) {
	commit := func(n int) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Topics = []kmsg.OffsetCommitRequestTopic{
			{Topic: "a", Partitions: make([]kmsg.OffsetCommitRequestTopicPartition, n/2)},
			{Topic: "b", Partitions: make([]kmsg.OffsetCommitRequestTopicPartition, n-n/2)},
		}
		return r
	}
	s, err := New(Config{Listen: "127.0.0.1:0", Groups: newFakeGroups(), Topology: SingleNode(Broker{NodeID: 0, Host: "127.0.0.1"}, "c")})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.MaxRequestPartitions != DefaultMaxRequestPartitions || DefaultMaxRequestPartitions != 1_000_000 {
		t.Fatalf("default bound %d (constant %d), want a million", s.cfg.MaxRequestPartitions, DefaultMaxRequestPartitions)
	}
	if err := checkEntries(commit(DefaultMaxRequestPartitions+1), DefaultMaxRequestPartitions); err == nil {
		t.Error("one partition past the default bound accepted")
	}
	if err := checkEntries(commit(DefaultMaxRequestPartitions), DefaultMaxRequestPartitions); err != nil {
		t.Errorf("at the default bound: %v", err)
	}
	if err := checkEntries(commit(DefaultMaxRequestPartitions+1), -1); err != nil {
		t.Errorf("without a bound: %v", err)
	}
	// The partitions a consumer-protocol member says it owns count too.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: make([]int32, 101)}}
	if err := checkEntries(hb, 100); err == nil {
		t.Error("a heartbeat owning more partitions than the bound accepted")
	}
}

// TestTruncatedBodyError: a body that ends before its fields is logged in
// words about a request (kbin's own error speaks of a response).
func TestTruncatedBodyError(t *testing.T) {
	var r request
	// Heartbeat v0 whose group id claims 30,000 bytes and has two.
	_, err := decodeFrameInto(&r, frame(12, 0, 1, "x", []byte{0x75, 0x30, 'a', 'b'})[4:], "", nil)
	if err == nil || !errors.Is(err, errMalformedBody) || !strings.Contains(err.Error(), "Heartbeat v0: the body ends before its fields do") ||
		strings.Contains(err.Error(), "response") {
		t.Fatalf("error %v", err)
	}
}

// TestBadRequestLogBurst: bad-request lines are logged at most burstLogMax
// per window; the first line of the next window says how many were left
// out.
func TestBadRequestLogBurst(t *testing.T) {
	var b burstLog
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	logged := 0
	for i := range 500 {
		if ok, skipped := b.Allow(t0.Add(time.Duration(i) * time.Millisecond)); ok {
			logged++
			if skipped != 0 {
				t.Fatalf("line %d: %d skipped within the first window", i, skipped)
			}
		}
	}
	if logged != burstLogMax {
		t.Fatalf("%d lines logged in one window, want %d", logged, burstLogMax)
	}
	ok, skipped := b.Allow(t0.Add(burstLogWindow))
	if !ok || skipped != 500-burstLogMax {
		t.Fatalf("next window: ok %v, skipped %d, want %d", ok, skipped, 500-burstLogMax)
	}
}
