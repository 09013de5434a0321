package server

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// bigCommit is an OffsetCommit v8 of group g whose frame is about
// partitions × 18 bytes.
func bigCommit(g string, partitions int) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation, r.MemberID = 8, g, -1, ""
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	for p := range partitions {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = int32(p), 1
		t.Partitions = append(t.Partitions, pp)
	}
	r.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return r
}

func frameLen(req kmsg.Request) int {
	return len(kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, 7)) - 4
}

// TestLargeRequestsShareABudget: large requests are decoded and answered
// only while the frames of those being served fit the budget; small ones
// never wait; a request that parks gives its share back once decoded.
func TestLargeRequestsShareABudget(t *testing.T) {
	const budget = 150 << 10
	reg := prometheus.NewRegistry()
	ts := startServer(t, withRegistry(reg), func(c *Config) { c.MaxInflightRequestBytes = budget })
	hold, holding := make(chan struct{}), make(chan struct{}, 1)
	unhold := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(unhold)
	unpark := sync.OnceFunc(func() { close(ts.groups.release) })
	t.Cleanup(unpark)
	ts.groups.hook = func(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error) {
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		switch r := req.(type) {
		case *kmsg.OffsetCommitRequest:
			if r.Group == "hold" {
				holding <- struct{}{}
				<-hold
			}
		case *kmsg.JoinGroupRequest:
			if r.Group == "park" {
				ts.groups.parked <- struct{}{}
				<-ts.groups.release
			}
		}
		return resp, nil
	}
	first, second := bigCommit("hold", 6000), bigCommit("other", 6000)
	if n := frameLen(first); n <= largeRequestBytes || 2*n <= budget || n > budget {
		t.Fatalf("a commit frame of %d bytes does not make the test: two must exceed the budget, one fit", n)
	}
	waits := ts.srv.metrics.budgetWaits

	c1, c2, c3 := ts.dial(t), ts.dial(t), ts.dial(t)
	c1.send(first, 1)
	<-holding // first holds its share while it is being answered
	c2.send(second, 2)
	testwait.For(t, 5*time.Second, "the second large request waiting for the budget", func() bool { return testutil.ToFloat64(waits) == 1 })
	// A small request is served meanwhile.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID = 4, "g", "m"
	c3.roundTrip(hb)
	for _, call := range ts.groups.snapshot() {
		if r, ok := call.req.(*kmsg.OffsetCommitRequest); ok && r.Group == "other" {
			t.Fatal("the second large request reached the coordinator while the first held the budget")
		}
	}
	unhold()
	c1.recv(first, 1)
	c2.recv(second, 2)

	// A parked JoinGroup, large itself, holds no share.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 9, "park", "consumer", 30000, 30000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", make([]byte, 120<<10)
	join.Protocols = append(join.Protocols, p)
	c4 := ts.dial(t)
	c4.send(join, 4)
	<-ts.groups.parked
	c5 := ts.dial(t)
	c5.roundTrip(bigCommit("after-join", 6000))
	unpark()
	c4.recv(join, 4)
	if got := testutil.ToFloat64(waits); got != 1 {
		t.Fatalf("%v large requests waited, want 1", got)
	}
}

// TestRequestBudgetLargerThanBudget: a frame larger than the whole budget
// takes all of it and is served alone; small frames take nothing.
func TestRequestBudgetLargerThanBudget(t *testing.T) {
	b := newRequestBudget(100 << 10)
	ctx := context.Background()
	waited := false
	wait := func() { waited = true }
	held, err := b.acquire(ctx, 1<<20, wait)
	if err != nil || waited || held != 100<<10 {
		t.Fatalf("acquire(1 MiB) = %d, %v (waited %v); want the whole budget at once", held, err, waited)
	}
	if h, _ := b.acquire(ctx, largeRequestBytes, wait); h != 0 || waited {
		t.Fatalf("a frame of %d bytes took %d of the budget", largeRequestBytes, h)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel() // waiting gives up at once
	if _, err := b.acquire(cctx, largeRequestBytes+1, wait); err == nil || !waited {
		t.Fatalf("a large frame was let through while a frame held the whole budget (waited %v, err %v)", waited, err)
	}
	b.release(held)
	if h, err := b.acquire(ctx, largeRequestBytes+1, nil); err != nil || h != largeRequestBytes+1 {
		t.Fatalf("after the release: %d, %v", h, err)
	}
	var none *requestBudget
	if h, err := none.acquire(ctx, 1<<30, nil); h != 0 || err != nil {
		t.Fatal("no budget must take nothing")
	}
	none.release(0)
}

// TestAnsweredRequestNotKept: once a request is answered, its connection
// does not keep the decoded request until its next one: an idle connection
// would otherwise hold the memory of the largest request it last sent.
func TestAnsweredRequestNotKept(t *testing.T) {
	tapped := make(chan weak.Pointer[kmsg.MetadataRequest], 1)
	ts := startServer(t, func(c *Config) {
		c.Tap = func(_ Client, req kmsg.Request, _ kmsg.Response) {
			if m, ok := req.(*kmsg.MetadataRequest); ok {
				tapped <- weak.Make(m)
			}
		}
	})
	empty := ""
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 4
	req.Topics = make([]kmsg.MetadataRequestTopic, 100_000)
	for i := range req.Topics {
		req.Topics[i].Topic = &empty
	}
	c := ts.dial(t)
	c.roundTrip(req)
	seen := <-tapped
	// The connection drops it just after writing the answer.
	testwait.For(t, 5*time.Second, "the answered Metadata request unreachable while its connection is idle", func() bool {
		runtime.GC()
		return seen.Value() == nil
	})
}

// TestBudgetReturnedAfterAPanic: a request whose handling panics (a bug:
// the connection is closed) gives its share of the budget back.
func TestBudgetReturnedAfterAPanic(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxInflightRequestBytes = 150 << 10 })
	ts.groups.hook = func(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error) {
		if r, ok := req.(*kmsg.OffsetCommitRequest); ok && r.Group == "boom" {
			panic("a bug in the coordinator")
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		return resp, nil
	}
	c1 := ts.dial(t)
	c1.send(bigCommit("boom", 6000), 1)
	c1.expectClosed()
	c2 := ts.dial(t)
	c2.roundTrip(bigCommit("after", 6000)) // waits for ever if the share leaked
}
