package server

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

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
