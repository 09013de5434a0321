package server

import (
	"bytes"
	"context"
	"fmt"
	"github.com/cohort-dev/cohort/internal/testlog"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/security/acl"
)

// dpTopic is the catalog topic of the data-plane tests: 3 partitions.
const dpTopic = "dp"

func startDataPlane(t *testing.T, opts ...serverOpt) *testServer {
	t.Helper()
	ts := startServer(t, opts...)
	if _, err := ts.srv.Catalog().Create(dpTopic, 3, nil); err != nil {
		t.Fatal(err)
	}
	// Serving for sure (an answer came back): Close cannot beat Serve.
	rc := ts.dial(t)
	rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
	rc.nc.Close()
	return ts
}

// answer runs req through the server's dispatch (no connection) and
// returns the response as a client decodes it.
func answer(t *testing.T, s *Server, req kmsg.Request) kmsg.Response {
	t.Helper()
	r := &request{key: req.Key(), version: req.GetVersion(), req: req}
	resp, err := s.handle(testCtx(t), Client{ID: "cli", Host: "127.0.0.1"}, r)
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	decoded := req.ResponseKind()
	if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return decoded
}

// fetchReq asks for topic's partitions at offset, by name or (v13+) by ID.
func fetchReq(v int16, maxWait int32, topic string, offset int64, partitions ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes = v, maxWait, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, catalog.TopicID(topic)
	for _, p := range partitions {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch = p, offset, 0
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func listOffsetsReq(v int16, topic string, ts int64, partitions ...int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = v
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func epochReq(v int16, topic string, epoch int32, partitions ...int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version, req.ReplicaID = v, -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = p, epoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func produceReq(v int16, acks int16, topic string, partitions ...int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = v, acks
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, catalog.TopicID(topic)
	for _, p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestDataPlaneVersionRanges: each data-plane API is answered over a real
// connection at its lowest and highest advertised version, and a version
// outside the range closes the connection.
func TestDataPlaneVersionRanges(t *testing.T) {
	ts := startDataPlane(t)
	for _, key := range []int16{keyProduce, keyFetch, keyListOffsets, keyOffsetForLeaderEpoch} {
		api := lookupAPI(key)
		for _, v := range []int16{api.Min, api.Max} {
			t.Run(fmt.Sprintf("%s v%d", api.Name, v), func(t *testing.T) {
				rc := ts.dial(t)
				switch key {
				case keyFetch:
					resp := rc.roundTrip(fetchReq(v, 0, dpTopic, 0, 2)).(*kmsg.FetchResponse)
					p := resp.Topics[0].Partitions[0]
					if p.ErrorCode != 0 || p.HighWatermark != 0 || p.LastStableOffset != 0 || logStart(v, p) != 0 || len(p.RecordBatches) != 0 {
						t.Errorf("partition answered %+v", p)
					}
					if v >= 13 && resp.Topics[0].TopicID != catalog.TopicID(dpTopic) {
						t.Errorf("v%d answer without the topic ID", v)
					}
				case keyListOffsets:
					resp := rc.roundTrip(listOffsetsReq(v, dpTopic, tsLatest, 1)).(*kmsg.ListOffsetsResponse)
					p := resp.Topics[0].Partitions[0]
					if p.ErrorCode != 0 || v > 0 && p.Offset != 0 || v == 0 && fmt.Sprint(p.OldStyleOffsets) != "[0]" {
						t.Errorf("partition answered %+v", p)
					}
				case keyOffsetForLeaderEpoch:
					resp := rc.roundTrip(epochReq(v, dpTopic, 0, 0)).(*kmsg.OffsetForLeaderEpochResponse)
					p := resp.Topics[0].Partitions[0]
					if p.ErrorCode != 0 || p.EndOffset != 0 || v >= 1 && p.LeaderEpoch != 0 {
						t.Errorf("partition answered %+v", p)
					}
				case keyProduce:
					resp := rc.roundTrip(produceReq(v, -1, dpTopic, 0)).(*kmsg.ProduceResponse)
					if p := resp.Topics[0].Partitions[0]; p.ErrorCode != errInvalidRequest || p.BaseOffset != -1 {
						t.Errorf("partition answered %+v", p)
					}
				}
			})
		}
		t.Run(api.Name+" outside the range", func(t *testing.T) {
			v := api.Max + 1
			if api.Min > 0 {
				v = api.Min - 1
			}
			rc := ts.dial(t)
			rc.writeRaw(frame(key, v, 1, "raw", nil))
			rc.expectClosed()
		})
	}
}

// logStart is a fetched partition's log start offset as the client sees
// it: only v5+ carries it (-1 before).
func logStart(v int16, p kmsg.FetchResponseTopicPartition) int64 {
	if v < 5 {
		if p.LogStartOffset != -1 {
			return -2 // not what a v4 client decodes
		}
		if p.ErrorCode == 0 {
			return 0
		}
	}
	return p.LogStartOffset
}

type offsetAnswer struct {
	code      int16
	offset    int64
	timestamp int64
	epoch     int32
}

// TestListOffsetsAnswers: an empty partition's answers, per version and
// timestamp, as Kafka gives them.
func TestListOffsetsAnswers(t *testing.T) {
	ts := startDataPlane(t)
	now := time.Now().UnixMilli()
	found := offsetAnswer{0, 0, -1, 0}
	none := offsetAnswer{0, -1, -1, -1}
	unsupported := offsetAnswer{errUnsupportedVersion, -1, -1, -1}
	cases := []struct {
		v    int16
		ts   int64
		want offsetAnswer
	}{
		{1, tsLatest, offsetAnswer{0, 0, -1, -1}}, // no LeaderEpoch before v4
		{4, tsLatest, found},
		{4, tsEarliest, found},
		{11, tsLatest, found},
		{4, tsMaxTimestamp, unsupported},
		{7, tsMaxTimestamp, none}, // no record has a timestamp
		{7, tsEarliestLocal, unsupported},
		{8, tsEarliestLocal, found},
		{8, tsLatestTiered, unsupported},
		{9, tsLatestTiered, none}, // nothing is tiered
		{10, tsEarliestPendingUpload, unsupported},
		{11, tsEarliestPendingUpload, none},
		{11, -7, unsupported},
		{1, -7, unsupported},
		{5, 0, none},
		{11, now, none},
	}
	for _, c := range cases {
		resp := answer(t, ts.srv, listOffsetsReq(c.v, dpTopic, c.ts, 0)).(*kmsg.ListOffsetsResponse)
		p := resp.Topics[0].Partitions[0]
		if got := (offsetAnswer{p.ErrorCode, p.Offset, p.Timestamp, p.LeaderEpoch}); got != c.want {
			t.Errorf("v%d timestamp %d: %+v, want %+v", c.v, c.ts, got, c.want)
		}
	}

	old := []struct {
		ts   int64
		max  int32
		want string
	}{
		{tsLatest, 1, "[0]"}, {tsEarliest, 5, "[0]"}, {now, 1, "[0]"}, {0, 1, "[0]"},
		{tsMaxTimestamp, 1, "[]"}, {tsLatest, 0, "[]"}, {tsLatest, -1, "[]"},
	}
	for _, c := range old {
		req := listOffsetsReq(0, dpTopic, c.ts, 0)
		req.Topics[0].Partitions[0].MaxNumOffsets = c.max
		p := answer(t, ts.srv, req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || fmt.Sprint(p.OldStyleOffsets) != c.want {
			t.Errorf("v0 timestamp %d max %d: code %d offsets %v, want %s", c.ts, c.max, p.ErrorCode, p.OldStyleOffsets, c.want)
		}
	}
}

// TestListOffsetsErrors: unknown topics and partitions, leader epochs and
// duplicate partitions.
func TestListOffsetsErrors(t *testing.T) {
	ts := startDataPlane(t)
	codes := func(req *kmsg.ListOffsetsRequest) string {
		var out []string
		for _, rt := range answer(t, ts.srv, req).(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 && (p.Offset != -1 || p.Timestamp != -1 || len(p.OldStyleOffsets) != 0) {
					t.Errorf("error answer with offsets: %+v", p)
				}
				out = append(out, fmt.Sprintf("%s/%d=%d", rt.Topic, p.Partition, p.ErrorCode))
			}
		}
		return strings.Join(out, " ")
	}
	for _, v := range []int16{0, 1, 4, 11} {
		if got := codes(listOffsetsReq(v, "missing", tsLatest, 0)); got != "missing/0=3" {
			t.Errorf("v%d unknown topic: %s", v, got)
		}
		if got := codes(listOffsetsReq(v, dpTopic, tsLatest, -1, 3, 2)); got != "dp/-1=3 dp/3=3 dp/2=0" {
			t.Errorf("v%d partitions: %s", v, got)
		}
	}
	for _, c := range []struct {
		v     int16
		epoch int32
		want  string
	}{
		{4, -1, "dp/0=0"}, {4, 0, "dp/0=0"}, {4, 1, "dp/0=75"}, {4, -2, "dp/0=74"},
		{3, 1, "dp/0=0"}, // no CurrentLeaderEpoch before v4
	} {
		req := listOffsetsReq(c.v, dpTopic, tsLatest, 0)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = c.epoch
		if got := codes(req); got != c.want {
			t.Errorf("v%d current epoch %d: %s, want %s", c.v, c.epoch, got, c.want)
		}
	}
	dup := listOffsetsReq(5, dpTopic, tsLatest, 0, 1)
	dup.Topics = append(dup.Topics, listOffsetsReq(5, dpTopic, tsEarliest, 0).Topics...)
	if got := codes(dup); got != "dp/0=42 dp/1=0 dp/0=42" {
		t.Errorf("duplicate partition: %s", got)
	}
	dup.Version = 0
	if got := codes(dup); got != "dp/0=0 dp/1=0 dp/0=0" {
		t.Errorf("duplicate partition at v0 (not checked, as Kafka): %s", got)
	}
}

// TestOffsetForLeaderEpochAnswers: the end of epoch 0 is 0; other epochs
// as Kafka's epoch cache of an empty partition answers them.
func TestOffsetForLeaderEpochAnswers(t *testing.T) {
	ts := startDataPlane(t)
	for _, c := range []struct {
		v, epoch, current int32
		want              offsetAnswer // offset: end offset; timestamp unused
	}{
		{4, 0, -1, offsetAnswer{0, 0, 0, 0}},
		{4, 0, 0, offsetAnswer{0, 0, 0, 0}},
		{4, -1, -1, offsetAnswer{0, -1, 0, -1}},
		{4, 3, -1, offsetAnswer{0, -1, 0, -1}},
		{4, -4, -1, offsetAnswer{0, 0, 0, -4}},
		{4, 0, 2, offsetAnswer{errUnknownLeaderEpoch, -1, 0, -1}},
		{2, 0, -3, offsetAnswer{errFencedLeaderEpoch, -1, 0, -1}},
		{1, 0, 2, offsetAnswer{0, 0, 0, 0}}, // no CurrentLeaderEpoch before v2
	} {
		req := epochReq(int16(c.v), dpTopic, c.epoch, 1)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = c.current
		p := answer(t, ts.srv, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if got := (offsetAnswer{p.ErrorCode, p.EndOffset, 0, p.LeaderEpoch}); got != c.want || p.Partition != 1 {
			t.Errorf("v%d epoch %d current %d: %+v (partition %d), want %+v", c.v, c.epoch, c.current, got, p.Partition, c.want)
		}
	}
	for _, req := range []*kmsg.OffsetForLeaderEpochRequest{epochReq(4, "missing", 0, 0), epochReq(4, dpTopic, 0, 3), epochReq(4, dpTopic, 0, -1)} {
		p := answer(t, ts.srv, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		if p.ErrorCode != errUnknownTopicOrPartition || p.EndOffset != -1 || p.LeaderEpoch != -1 {
			t.Errorf("%s/%d: %+v", req.Topics[0].Topic, req.Topics[0].Partitions[0].Partition, p)
		}
	}
}

// TestMetadataLeaderEpochs: Metadata gives every partition leader epoch 0
// from v7 (the version that carries it), which the data-plane answers use.
func TestMetadataLeaderEpochs(t *testing.T) {
	ts := startDataPlane(t)
	for v := int16(7); v <= lookupAPI(keyMetadata).Max; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		for _, tp := range answer(t, ts.srv, req).(*kmsg.MetadataResponse).Topics {
			for _, p := range tp.Partitions {
				if p.LeaderEpoch != 0 {
					t.Errorf("v%d %s/%d: leader epoch %d", v, *tp.Topic, p.Partition, p.LeaderEpoch)
				}
			}
		}
	}
}

// TestFetchAnswers: offsets, unknown topics and partitions, topic IDs,
// leader epochs and isolation levels.
func TestFetchAnswers(t *testing.T) {
	ts := startDataPlane(t)
	summary := func(req *kmsg.FetchRequest) string {
		resp := answer(t, ts.srv, req).(*kmsg.FetchResponse)
		var out []string
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				want := int64(0)
				if p.ErrorCode != 0 {
					want = -1
				}
				if p.HighWatermark != want || p.LastStableOffset != want || logStart(req.Version, p) != want || len(p.RecordBatches) != 0 {
					t.Errorf("v%d partition %d (code %d): HW %d LSO %d start %d, %d record bytes", req.Version, p.Partition, p.ErrorCode,
						p.HighWatermark, p.LastStableOffset, p.LogStartOffset, len(p.RecordBatches))
				}
				out = append(out, fmt.Sprintf("%d=%d", p.Partition, p.ErrorCode))
			}
		}
		return strings.Join(out, " ")
	}
	for _, v := range []int16{4, 11, 12, 13, 18} {
		if got := summary(fetchReq(v, 0, dpTopic, 0, 0, 1, 2, 3, -1)); got != "0=0 1=0 2=0 3=3 -1=3" {
			t.Errorf("v%d partitions: %s", v, got)
		}
		for _, off := range []int64{1, -1, 1 << 40} {
			if got := summary(fetchReq(v, 0, dpTopic, off, 0)); got != "0=1" {
				t.Errorf("v%d offset %d: %s, want OFFSET_OUT_OF_RANGE", v, off, got)
			}
		}
		unknown := int16(errUnknownTopicOrPartition)
		if v >= 13 {
			unknown = errUnknownTopicID
		}
		if got := summary(fetchReq(v, 0, "missing", 0, 0)); got != fmt.Sprintf("0=%d", unknown) {
			t.Errorf("v%d unknown topic: %s", v, got)
		}
	}
	zeroID := fetchReq(13, 0, dpTopic, 0, 0)
	zeroID.Topics[0].TopicID = [16]byte{}
	if got := summary(zeroID); got != "0=100" {
		t.Errorf("zero topic ID: %s", got)
	}
	for _, c := range []struct {
		v     int16
		epoch int32
		want  string
	}{{9, 1, "0=75"}, {9, -2, "0=74"}, {9, -1, "0=0"}, {18, 0, "0=0"}, {8, 5, "0=0"}} {
		req := fetchReq(c.v, 0, dpTopic, 0, 0)
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = c.epoch
		if got := summary(req); got != c.want {
			t.Errorf("v%d current epoch %d: %s, want %s", c.v, c.epoch, got, c.want)
		}
	}
	for _, level := range []int8{0, 1} {
		req := fetchReq(11, 0, dpTopic, 0, 0)
		req.IsolationLevel = level
		p := answer(t, ts.srv, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if (p.AbortedTransactions != nil) != (level == 1) || len(p.AbortedTransactions) != 0 {
			t.Errorf("isolation level %d: aborted transactions %#v", level, p.AbortedTransactions)
		}
	}
}

// TestFetchSessionsDeclined: full fetches are answered in full with
// SessionID 0 (no session created); an incremental one names a session
// that does not exist.
func TestFetchSessionsDeclined(t *testing.T) {
	ts := startDataPlane(t)
	for _, c := range []struct {
		id, epoch int32
		code      int16
	}{
		{0, -1, 0},    // sessionless
		{0, 0, 0},     // asks for a new session: declined
		{77, 0, 0},    // closes session 77 and asks for a new one
		{77, -1, 0},   // closes session 77, sessionless
		{77, 3, 70},   // incremental on an unknown session
		{0, 1, 70},    // incremental without a session id
		{77, -5, 70},  // not a full fetch either
		{-9, 100, 70}, // nonsense
	} {
		req := fetchReq(12, 500, dpTopic, 0, 0, 1)
		req.SessionID, req.SessionEpoch = c.id, c.epoch
		resp := answer(t, ts.srv, req).(*kmsg.FetchResponse)
		if resp.SessionID != 0 || resp.ErrorCode != c.code {
			t.Errorf("session %d epoch %d: session %d code %d, want 0 and %d", c.id, c.epoch, resp.SessionID, resp.ErrorCode, c.code)
		}
		if c.code != 0 && len(resp.Topics) != 0 || c.code == 0 && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2) {
			t.Errorf("session %d epoch %d: %d topics answered", c.id, c.epoch, len(resp.Topics))
		}
	}
}

// TestFetchHoldRules: when Kafka parks a fetch, and for how long.
func TestFetchHoldRules(t *testing.T) {
	resp := func(codes ...int16) *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		rt := kmsg.NewFetchResponseTopic()
		for i, c := range codes {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = int32(i), c
			rt.Partitions = append(rt.Partitions, p)
		}
		r.Topics = append(r.Topics, rt)
		return r
	}
	req := func(maxWait, minBytes int32) *kmsg.FetchRequest {
		r := fetchReq(12, maxWait, dpTopic, 0)
		r.MinBytes = minBytes
		return r
	}
	sessionErr := resp(0)
	sessionErr.ErrorCode = errFetchSessionIDNotFound
	for _, c := range []struct {
		name string
		req  *kmsg.FetchRequest
		resp *kmsg.FetchResponse
		want time.Duration
	}{
		{"readable", req(500, 1), resp(0, 0), 500 * time.Millisecond},
		{"capped", req(600_000, 1), resp(0), fetchHoldCap},
		{"no wait", req(0, 1), resp(0), 0},
		{"negative wait", req(-5, 1), resp(0), 0},
		{"min bytes 0", req(500, 0), resp(0), 0},
		{"session error", req(500, 1), sessionErr, 0},
		{"no partitions", req(500, 1), resp(), 0},
		{"only refused or unknown", req(500, 1), resp(codeTopicAuthz, errUnknownTopicOrPartition, errUnknownTopicID), 0},
		{"refused and readable", req(500, 1), resp(codeTopicAuthz, 0, errUnknownTopicOrPartition), 500 * time.Millisecond},
		{"out of range", req(500, 1), resp(0, errOffsetOutOfRange), 0},
		{"fenced epoch", req(500, 1), resp(errFencedLeaderEpoch, 0), 0},
	} {
		if got := fetchHold(c.req, c.resp); got != c.want {
			t.Errorf("%s: hold %v, want %v", c.name, got, c.want)
		}
	}
}

// watchHolds reports, on the returned channel, every Fetch answer a
// connection starts holding.
func watchHolds(t *testing.T) <-chan struct{} {
	ch := make(chan struct{}, 16)
	f := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	holdStarted.Store(&f)
	t.Cleanup(func() { holdStarted.Store(nil) })
	return ch
}

func waitHold(t *testing.T, holds <-chan struct{}) {
	t.Helper()
	select {
	case <-holds:
	case <-time.After(10 * time.Second):
		t.Fatal("the Fetch was not held")
	}
}

// TestFetchHeldForMaxWait: an idle fetch is answered after MaxWaitMillis,
// one that cannot wait (out of range offset, MinBytes 0) at once.
func TestFetchHeldForMaxWait(t *testing.T) {
	ts := startDataPlane(t)
	rc := ts.dial(t)
	start := time.Now()
	resp := rc.roundTrip(fetchReq(12, 300, dpTopic, 0, 0)).(*kmsg.FetchResponse)
	if d := time.Since(start); d < 290*time.Millisecond || d > 10*time.Second {
		t.Errorf("a fetch with MaxWaitMillis 300 was answered after %v", d)
	}
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("held fetch answered %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	outOfRange := fetchReq(12, 60_000, dpTopic, 4, 0)
	noMinBytes := fetchReq(12, 60_000, dpTopic, 0, 0)
	noMinBytes.MinBytes = 0
	for _, req := range []*kmsg.FetchRequest{outOfRange, noMinBytes} {
		start := time.Now()
		rc.roundTrip(req)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("a fetch that cannot wait was held %v", d)
		}
	}
}

// TestFetchHoldEndsOnHangup: a client hanging up during the hold ends its
// connection at once, not at MaxWaitMillis.
func TestFetchHoldEndsOnHangup(t *testing.T) {
	holds := watchHolds(t)
	ts := startDataPlane(t)
	rc := ts.dial(t)
	rc.send(fetchReq(12, 60_000, dpTopic, 0, 0), 1)
	waitHold(t, holds)
	rc.nc.Close()
	if !testwait.Until(10*time.Second, func() bool {
		ts.srv.mu.Lock()
		defer ts.srv.mu.Unlock()
		return len(ts.srv.conns) == 0
	}) {
		t.Fatal("the connection still held its fetch 10s after the client hung up")
	}
}

// TestFetchHoldEndsOnShutdown: Shutdown ends the hold and lets the answer
// out; Close ends it without one.
func TestFetchHoldEndsOnShutdown(t *testing.T) {
	holds := watchHolds(t)
	ts := startDataPlane(t)
	rc := ts.dial(t)
	req := fetchReq(12, 60_000, dpTopic, 0, 0)
	rc.send(req, 1)
	waitHold(t, holds)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v (after %v)", err, time.Since(start))
	}
	resp := rc.recv(req, 1).(*kmsg.FetchResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("answer at shutdown: %+v", resp.Topics[0].Partitions[0])
	}

	ts2 := startDataPlane(t)
	rc2 := ts2.dial(t)
	rc2.send(req, 1)
	waitHold(t, holds)
	start = time.Now()
	ts2.srv.Close()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v with a held fetch", d)
	}
	rc2.expectClosed()
}

// TestFetchHoldEndsOnPipelinedRequest: a request the client sends behind a
// held fetch ends the hold; both are answered in order.
func TestFetchHoldEndsOnPipelinedRequest(t *testing.T) {
	ts := startDataPlane(t)
	rc := ts.dial(t)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	fetch := fetchReq(12, 60_000, dpTopic, 0, 0)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "m", 1
	start := time.Now()
	rc.writeRaw(append(f.AppendRequest(nil, fetch, 1), f.AppendRequest(nil, hb, 2)...))
	rc.recv(fetch, 1)
	rc.recv(hb, 2)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("answered after %v", d)
	}
}

// TestProduceRefused: every partition of a Produce is refused with a
// message (v8+), unknown ones as Kafka; the refusal is logged once per
// connection, and an acks=0 Produce closes the connection.
func TestProduceRefused(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	ts := startDataPlane(t, func(c *Config) { c.Logger = log })
	logged := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(buf.String(), "refusing Produce")
	}
	rc := ts.dial(t)
	for _, v := range []int16{3, 7, 8, 12, 13} {
		req := produceReq(v, -1, dpTopic, 0, 2, 3)
		missing := produceReq(v, -1, "missing", 0)
		req.Topics = append(req.Topics, missing.Topics...)
		resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
		unknownTopic := errUnknownTopicOrPartition
		if v >= 13 {
			unknownTopic = errUnknownTopicID
		}
		want := []int16{errInvalidRequest, errInvalidRequest, errUnknownTopicOrPartition, unknownTopic}
		var got []int16
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				got = append(got, p.ErrorCode)
				if p.BaseOffset != -1 {
					t.Errorf("v%d: base offset %d", v, p.BaseOffset)
				}
				hasMsg := p.ErrorMessage != nil && strings.Contains(*p.ErrorMessage, "stores no records")
				if hasMsg != (v >= 8 && p.ErrorCode == errInvalidRequest) {
					t.Errorf("v%d code %d: message %v", v, p.ErrorCode, p.ErrorMessage)
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("v%d: codes %v, want %v", v, got, want)
		}
	}
	if n := logged(); n != 1 {
		t.Errorf("%d log lines for one connection's Produce requests", n)
	}
	rc2 := ts.dial(t)
	rc2.send(produceReq(9, 0, dpTopic, 0), 3)
	rc2.expectClosed()
	if n := logged(); n != 2 {
		t.Errorf("%d log lines after a second connection's Produce", n)
	}
}

// TestOffsetCommitCatalogPartitions: a partition a catalog topic does not
// have is UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator;
// the other partitions, and topics outside the catalog, are committed, and
// the answers keep the request's order.
func TestOffsetCommitCatalogPartitions(t *testing.T) {
	ts := startDataPlane(t)
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		return group.ErrorResponse(req, 0), nil // every partition committed
	}
	// Outside the catalog too, a negative partition or a topic without a
	// name is in no cluster's metadata: UNKNOWN_TOPIC_OR_PARTITION, as Kafka.
	resp := answer(t, ts.srv, commitReq(8, "g", "dp:0,5,-1,2", "elsewhere:7,-1", "dp:9", ":0")).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), "dp/0=0 dp/5=3 dp/-1=3 dp/2=0 elsewhere/7=0 elsewhere/-1=3 dp/9=3 /0=3"; got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
	calls := ts.groups.snapshot()
	if len(calls) != 1 {
		t.Fatalf("%d coordinator calls", len(calls))
	}
	sent := calls[0].req.(*kmsg.OffsetCommitRequest)
	if got := commitCodes(group.ErrorResponse(sent, 0).(*kmsg.OffsetCommitResponse)); got != "dp/0=0 dp/2=0 elsewhere/7=0" {
		t.Errorf("the coordinator was asked for %s", got)
	}

	// Nothing left: the coordinator is not asked.
	resp = answer(t, ts.srv, commitReq(8, "g", "dp:3", "dp:-2")).(*kmsg.OffsetCommitResponse)
	if got := commitCodes(resp); got != "dp/3=3 dp/-2=3" {
		t.Errorf("answer %s", got)
	}
	if n := len(ts.groups.snapshot()); n != 1 {
		t.Errorf("the coordinator was asked %d times", n)
	}

	// A group-level error of the coordinator shows on the forwarded part.
	ts.groups.mu.Lock()
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		return group.ErrorResponse(req, group.ErrUnknownMemberID), nil
	}
	ts.groups.mu.Unlock()
	resp = answer(t, ts.srv, commitReq(8, "g", "dp:7,1")).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), fmt.Sprintf("dp/7=3 dp/1=%d", group.ErrUnknownMemberID); got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
}

// TestOffsetCommitCatalogCheckAllocations: the catalog check of a commit
// whose partitions are all valid allocates nothing.
func TestOffsetCommitCatalogCheckAllocations(t *testing.T) {
	oc := commitReq(9, "g", "t1:0,1,2", "t2:0", "t3:5", "other:4")
	groups := staticGroups{keyOffsetCommit: group.ErrorResponse(oc, 0)}
	newServer := func(topics map[string]int32) *Server {
		cat := catalog.New(catalog.Options{})
		for name, n := range topics {
			if _, err := cat.Create(name, n, nil); err != nil {
				t.Fatal(err)
			}
		}
		s, err := New(Config{Listen: "127.0.0.1:0", Groups: groups, Topology: SingleNode(Broker{}, "c"), Logger: discard(), Catalog: cat})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	empty, full := newServer(nil), newServer(map[string]int32{"t1": 3, "t2": 1, "t3": 6})
	r := &request{key: keyOffsetCommit, version: 9, req: oc}
	allocs := func(s *Server) float64 {
		return testing.AllocsPerRun(200, func() {
			if resp, err := s.handle(context.Background(), Client{}, r); err != nil || resp != groups[keyOffsetCommit] {
				t.Fatalf("answer %v, %v", resp, err)
			}
		})
	}
	if a, b := allocs(empty), allocs(full); b > a {
		t.Errorf("%.1f allocations with the topics in the catalog, %.1f without", b, a)
	}
	// v10 (topics by ID, all known): naming them and writing the IDs
	// back allocates nothing either.
	v9 := allocs(full)
	byID := commitReq(10, "g", "t1:0,1,2", "t2:0", "t3:5")
	groups[keyOffsetCommit] = group.ErrorResponse(byID, 0)
	r = &request{key: keyOffsetCommit, version: 10, req: byID}
	if v10 := allocs(full); v10 > v9 {
		t.Errorf("%.1f allocations at v10, %.1f at v9", v10, v9)
	}
}

// TestDataPlaneCounted: the data-plane APIs have request counters.
func TestDataPlaneCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := startDataPlane(t, withRegistry(reg))
	rc := ts.dial(t)
	rc.roundTrip(fetchReq(12, 0, dpTopic, 0, 0))
	rc.roundTrip(listOffsetsReq(8, dpTopic, tsLatest, 0))
	rc.roundTrip(epochReq(4, dpTopic, 0, 0))
	rc.roundTrip(produceReq(9, 1, dpTopic, 0))
	rc.roundTrip(kmsg.NewPtrApiVersionsRequest()) // written after the others were counted
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "cohort_server_requests_total" {
			continue
		}
		for _, m := range mf.Metric {
			got[m.Label[0].GetValue()] = m.Counter.GetValue()
		}
	}
	for _, api := range []string{"Fetch", "ListOffsets", "OffsetForLeaderEpoch", "Produce"} {
		if got[api] != 1 {
			t.Errorf("%s counted %v times, want 1", api, got[api])
		}
	}
}

// TestAuthzDataPlane: Fetch needs TOPIC READ (a replica CLUSTER
// CLUSTER_ACTION), ListOffsets and OffsetForLeaderEpoch TOPIC DESCRIBE (or
// CLUSTER_ACTION for the latter), Produce TOPIC WRITE and, when
// transactional, TRANSACTIONAL_ID WRITE; refusals are per partition.
func TestAuthzDataPlane(t *testing.T) {
	e := newAuthzEnv(t)
	const topic = "dp-topic"
	e.ensureTopic(topic, 2)
	partitionCode := func(resp kmsg.Response) int16 {
		switch r := resp.(type) {
		case *kmsg.FetchResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.ListOffsetsResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.OffsetForLeaderEpochResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.ProduceResponse:
			return r.Topics[0].Partitions[0].ErrorCode
		}
		t.Fatalf("unexpected %T", resp)
		return 0
	}
	// A topic named by its ID is refused as TOPIC_AUTHORIZATION_FAILED only
	// to a principal that may describe it; to others it is an unknown ID
	// (hiddenByID). byID checks that rule in each case of a matrix and
	// passes the refusal on as the matrix's TOPIC_AUTHORIZATION_FAILED;
	// -1 marks a breach of the rule.
	byID := func(v, from int16, code int16) int16 {
		if v < from || code != errUnknownTopicID && code != codeTopicAuthz {
			return code
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		md.Topics = append(md.Topics, rt)
		describable := e.as(alice, md).(*kmsg.MetadataResponse).Topics[0].ErrorCode == errNone
		if describable != (code == codeTopicAuthz) {
			t.Errorf("by ID, describable %v: code %d", describable, code)
			return -1
		}
		return codeTopicAuthz
	}
	for _, v := range versions(keyFetch) {
		t.Run(fmt.Sprintf("Fetch v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpRead, topic)},
				run:   func() int16 { return byID(v, 13, partitionCode(e.as(alice, fetchReq(v, 0, topic, 0, 1)))) },
			})
			replica := fetchReq(v, 0, topic, 0, 1)
			replica.ReplicaID, replica.ReplicaState.ID = 2, 2
			e.check(t, matrix{
				needs: []need{{acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName, codeTopicAuthz}},
				run:   func() int16 { return byID(v, 13, partitionCode(e.as(alice, replica))) },
			})
		})
	}
	for _, v := range versions(keyListOffsets) {
		t.Run(fmt.Sprintf("ListOffsets v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpDescribe, topic)},
				run:   func() int16 { return partitionCode(e.as(alice, listOffsetsReq(v, topic, tsEarliest, 0))) },
			})
		})
	}
	for _, v := range versions(keyOffsetForLeaderEpoch) {
		t.Run(fmt.Sprintf("OffsetForLeaderEpoch v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpDescribe, topic)},
				run:   func() int16 { return partitionCode(e.as(alice, epochReq(v, topic, 0, 0))) },
			})
			e.grant(allow(alice, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName))
			if c := partitionCode(e.as(alice, epochReq(v, topic, 0, 0))); c != 0 {
				t.Errorf("with CLUSTER_ACTION: code %d", c)
			}
		})
	}
	for _, v := range versions(keyProduce) {
		t.Run(fmt.Sprintf("Produce v%d", v), func(t *testing.T) {
			e.check(t, matrix{
				needs: []need{topicNeed(acl.OpWrite, topic)},
				run:   func() int16 { return byID(v, 13, partitionCode(e.as(alice, produceReq(v, 1, topic, 0)))) },
				ok:    errInvalidRequest,
			})
			txn := produceReq(v, -1, topic, 0)
			txn.TransactionID = kmsg.StringPtr("txn-id")
			e.check(t, matrix{
				needs: []need{{acl.OpWrite, acl.ResourceTransactionalID, "txn-id", codeTxnIDAuthz}, topicNeed(acl.OpWrite, topic)},
				run:   func() int16 { return byID(v, 13, partitionCode(e.as(alice, txn))) },
				ok:    errInvalidRequest,
			})
		})
	}
	// Existence is revealed only to those who may describe the topic.
	e.grant()
	if c := partitionCode(e.as(alice, listOffsetsReq(5, "dp-missing", tsLatest, 0))); c != codeTopicAuthz {
		t.Errorf("undescribable missing topic: %d", c)
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceTopic, "dp-missing"))
	if c := partitionCode(e.as(alice, listOffsetsReq(5, "dp-missing", tsLatest, 0))); c != errUnknownTopicOrPartition {
		t.Errorf("describable missing topic: %d", c)
	}
	// By ID, an existing topic the principal may not describe gets the
	// answer of a topic that does not exist, since cohort's topic IDs are
	// derived from names; with DESCRIBE, the refusal is named.
	e.grant()
	for _, name := range []string{topic, "dp-missing"} {
		if c := partitionCode(e.as(alice, fetchReq(13, 0, name, 0, 0))); c != errUnknownTopicID {
			t.Errorf("fetch by ID of %s without DESCRIBE: %d, want UNKNOWN_TOPIC_ID", name, c)
		}
		if c := partitionCode(e.as(alice, produceReq(13, 1, name, 0))); c != errUnknownTopicID {
			t.Errorf("produce by ID of %s without DESCRIBE: %d, want UNKNOWN_TOPIC_ID", name, c)
		}
	}
	e.grant(allow(alice, acl.OpDescribe, acl.ResourceTopic, topic))
	if c := partitionCode(e.as(alice, fetchReq(13, 0, topic, 0, 0))); c != codeTopicAuthz {
		t.Errorf("fetch by ID with DESCRIBE, without READ: %d, want TOPIC_AUTHORIZATION_FAILED", c)
	}
	if c := partitionCode(e.as(alice, produceReq(13, 1, topic, 0))); c != codeTopicAuthz {
		t.Errorf("produce by ID with DESCRIBE, without WRITE: %d, want TOPIC_AUTHORIZATION_FAILED", c)
	}
}

// TestAuthzOffsetCommitCatalog: refused topics are answered before the
// catalog check, which applies to the allowed ones.
func TestAuthzOffsetCommitCatalog(t *testing.T) {
	e := newAuthzEnv(t)
	e.ensureTopic("cat-ok", 2)
	e.ensureTopic("cat-no", 2)
	e.grant(allow(alice, acl.OpRead, acl.ResourceGroup, "g"), allow(alice, acl.OpRead, acl.ResourceTopic, "cat-ok"),
		allow(alice, acl.OpRead, acl.ResourceTopic, "outside"))
	resp := e.as(alice, commitReq(8, "g", "cat-ok:0,2", "cat-no:0,9", "outside:5")).(*kmsg.OffsetCommitResponse)
	if got, want := commitCodes(resp), "cat-ok/0=0 cat-ok/2=3 cat-no/0=29 cat-no/9=29 outside/5=0"; got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
	if got := e.committed("g"); fmt.Sprint(got) != "map[cat-ok:7 outside:7]" {
		t.Errorf("committed %v", got)
	}
}

// offsetDeleteReq builds an OffsetDelete of group g; each spec is
// "topic:p,p,...".
func offsetDeleteReq(g string, specs ...string) *kmsg.OffsetDeleteRequest {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = g
	for _, spec := range specs {
		name, ps, _ := strings.Cut(spec, ":")
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = name
		for _, p := range strings.Split(ps, ",") {
			n, _ := strconv.Atoi(p)
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = int32(n)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// deletedAll answers req as a coordinator deleting every partition's
// offset.
func deletedAll(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	for _, rt := range req.Topics {
		at := kmsg.NewOffsetDeleteResponseTopic()
		at.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			ap := kmsg.NewOffsetDeleteResponseTopicPartition()
			ap.Partition = rp.Partition
			at.Partitions = append(at.Partitions, ap)
		}
		resp.Topics = append(resp.Topics, at)
	}
	return resp
}

func offsetDeleteCodes(resp *kmsg.OffsetDeleteResponse) string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%d", t.Topic, p.Partition, p.ErrorCode))
		}
	}
	return strings.Join(out, " ")
}

// TestOffsetDeleteCatalogPartitions: as for OffsetCommit, an OffsetDelete
// of a partition a catalog topic does not have is UNKNOWN_TOPIC_OR_PARTITION
// (Kafka answers a partition missing from its metadata so) and never
// reaches the coordinator; the rest does, in the request's order. Unlike a
// commit the coordinator is asked even when nothing is left, and its
// group-level error is the answer. (cohort passed every partition on.)
func TestOffsetDeleteCatalogPartitions(t *testing.T) {
	ts := startDataPlane(t)
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		return deletedAll(req.(*kmsg.OffsetDeleteRequest)), nil
	}
	resp := answer(t, ts.srv, offsetDeleteReq("g", "dp:0,5,-1,2", "elsewhere:7", "dp:9")).(*kmsg.OffsetDeleteResponse)
	if got, want := offsetDeleteCodes(resp), "dp/0=0 dp/5=3 dp/-1=3 dp/2=0 elsewhere/7=0 dp/9=3"; got != want {
		t.Errorf("answer %s, want %s", got, want)
	}
	calls := ts.groups.snapshot()
	if len(calls) != 1 {
		t.Fatalf("%d coordinator calls", len(calls))
	}
	sent := calls[0].req.(*kmsg.OffsetDeleteRequest)
	if got := offsetDeleteCodes(deletedAll(sent)); got != "dp/0=0 dp/2=0 elsewhere/7=0" {
		t.Errorf("the coordinator was asked for %s", got)
	}

	// Nothing left: the coordinator is still asked, and its group-level
	// answer is the answer.
	ts.groups.mu.Lock()
	ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
		return group.ErrorResponse(req, group.ErrGroupIDNotFound), nil
	}
	ts.groups.mu.Unlock()
	resp = answer(t, ts.srv, offsetDeleteReq("g", "dp:3")).(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode != group.ErrGroupIDNotFound || len(ts.groups.snapshot()) != 2 {
		t.Errorf("nothing left: error %d after %d coordinator calls", resp.ErrorCode, len(ts.groups.snapshot()))
	}
}

// Metadata names a topic once however often it is asked for, by name or
// by ID, and an all-zero topic ID (v12) is UNKNOWN_TOPIC_ID, as Kafka
// answers them.
func TestMetadataDuplicatesAndZeroID(t *testing.T) {
	ts := startDataPlane(t)
	c := ts.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	for range 2 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(dpTopic)
		req.Topics = append(req.Topics, rt)
	}
	if r := c.roundTrip(req).(*kmsg.MetadataResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("a name asked twice: %+v", r.Topics)
	}
	dp, _ := ts.srv.Catalog().Lookup(dpTopic)
	id := dp.ID
	req = kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	for _, tid := range [][16]byte{id, id, {}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = tid
		req.Topics = append(req.Topics, rt)
	}
	r := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(r.Topics) != 2 || r.Topics[0].ErrorCode != 0 || r.Topics[1].ErrorCode != errUnknownTopicID {
		t.Fatalf("an ID asked twice and a zero ID: %+v", r.Topics)
	}
}

// TestProduceRefusedLogBurst: a producer with acks=0 has its connection
// closed at every Produce and reconnects at once (kgo does, about a hundred
// times a second); each new connection's refusal must not add a line: at
// most burstLogMax lines a window over all connections, the rest counted in
// the next line's unlogged_before.
func TestProduceRefusedLogBurst(t *testing.T) {
	var buf testlog.Buffer
	ts := startDataPlane(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&buf, nil)) })
	for range 3 * burstLogMax {
		rc := ts.dial(t)
		rc.send(produceReq(9, 0, dpTopic, 0), 3)
		rc.expectClosed()
	}
	if n := strings.Count(buf.String(), "refusing Produce"); n != burstLogMax {
		t.Fatalf("%d lines for %d reconnecting acks=0 producers, want %d:\n%s", n, 3*burstLogMax, burstLogMax, buf.String())
	}
}
