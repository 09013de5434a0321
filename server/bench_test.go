package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
)

// BenchmarkHeartbeatRoundTrip measures one Heartbeat v4 request/response on
// one connection against a Groups that answers immediately: the front end's
// own cost (framing, decode, dispatch, encode, write) on top of a loopback
// TCP round trip. The "tcp-floor" peer answers the same frames with a canned
// response of the same size after only reading the size prefix and body, so
// cohort/tcp-floor is the front end's overhead ratio.
func BenchmarkHeartbeatRoundTrip(b *testing.B) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(4)
	req.Group, req.MemberID, req.Generation = "bench-group", "bench-member-0123456789", 1
	frameBytes := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 1)

	run := func(b *testing.B, addr string) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		resp := make([]byte, 64)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := nc.Write(frameBytes); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(nc, resp[:4]); err != nil {
				b.Fatal(err)
			}
			n := binary.BigEndian.Uint32(resp)
			if _, err := io.ReadFull(nc, resp[:n]); err != nil {
				b.Fatal(err)
			}
		}
	}

	b.Run("cohort", func(b *testing.B) {
		ts := startServer(b)
		ts.groups.hook = func(_ context.Context, _ Client, req kmsg.Request) (kmsg.Response, error) {
			return req.ResponseKind(), nil
		}
		run(b, ts.addr)
	})

	b.Run("tcp-floor", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		hb := kmsg.NewPtrHeartbeatResponse()
		hb.SetVersion(4)
		canned, _ := appendResponse(nil, 1, hb)
		go func() {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			buf := make([]byte, 256)
			for {
				if _, err := io.ReadFull(nc, buf[:4]); err != nil {
					return
				}
				n := binary.BigEndian.Uint32(buf)
				if n > uint32(len(buf)) {
					return
				}
				if _, err := io.ReadFull(nc, buf[:n]); err != nil {
					return
				}
				if _, err := nc.Write(canned); err != nil {
					return
				}
			}
		}()
		run(b, ln.Addr().String())
	})
}

// BenchmarkOffsetCommitDispatch measures the front end's dispatch of one
// OffsetCommit of 50 partitions of a catalog topic (the catalog's partition
// check, and at v10 naming the topic from its ID and writing the ID back),
// without a connection and with a Groups that answers at once: v10/v9 is
// what naming topics by ID adds to a stock franz-go consumer's commit.
func BenchmarkOffsetCommitDispatch(b *testing.B) {
	cat := catalog.New(catalog.Options{})
	if _, err := cat.Create("events", 50, nil); err != nil {
		b.Fatal(err)
	}
	parts := "events:0"
	for p := 1; p < 50; p++ {
		parts += "," + strconv.Itoa(p)
	}
	for _, v := range []int16{9, 10} {
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			req := commitReq(v, "g", parts)
			s, err := New(Config{Listen: "127.0.0.1:0", Groups: staticGroups{keyOffsetCommit: group.ErrorResponse(req, 0)},
				Topology: SingleNode(Broker{}, "c"), Logger: discard(), Catalog: cat})
			if err != nil {
				b.Fatal(err)
			}
			r := &request{key: keyOffsetCommit, version: v, req: req}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.handle(context.Background(), Client{}, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
