package server

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestIdleConnectionsClosed: with ConnectionsMaxIdle, a connection that
// sent no complete request for longer than the period is closed, whether
// it sent nothing or stopped in the middle of a frame (which holds the bytes
// it sent); a connection that sent a request within the period, one whose
// request is parked, and an in-process one stay. The clock is injected and
// the sweep called directly.
func TestIdleConnectionsClosed(t *testing.T) {
	var now atomic.Int64
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	advance := func(d time.Duration) time.Time { return time.Unix(0, now.Add(int64(d))) }
	ts := startServer(t, func(c *Config) { c.ConnectionsMaxIdle, c.Now = 10*time.Minute, clock })
	ts.srv.sweepIdle(clock())

	quiet := ts.dial(t)
	quiet.roundTrip(kmsg.NewPtrApiVersionsRequest())
	partial := ts.dial(t)
	partial.writeRaw(append(binary.BigEndian.AppendUint32(nil, 100<<10), make([]byte, 1<<10)...))
	active := ts.dial(t)
	active.roundTrip(kmsg.NewPtrApiVersionsRequest())
	parked := ts.dial(t)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.ProtocolType = "park", 10000, "consumer"
	parked.send(join, 7)
	<-ts.groups.parked
	inProcess, sv := net.Pipe()
	defer inProcess.Close()
	if err := ts.srv.ServeConn(sv, "PLAINTEXT"); err != nil {
		t.Fatal(err)
	}

	ts.srv.sweepIdle(advance(6 * time.Minute))
	if n := ts.srv.sweepIdle(clock()); n != 0 {
		t.Fatalf("%d connections closed after 6 minutes", n)
	}
	active.roundTrip(kmsg.NewPtrApiVersionsRequest()) // idle again from minute 6
	if n := ts.srv.sweepIdle(advance(5 * time.Minute)); n != 2 {
		t.Fatalf("closed %d connections at minute 11, want the quiet one and the one mid-frame", n)
	}
	quiet.expectClosed()
	partial.expectClosed()
	if r := active.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("active connection: %d", r.ErrorCode)
	}
	if !answers(inProcess) {
		t.Fatal("the in-process connection was closed")
	}
	close(ts.groups.release)
	if r := parked.recv(join, 7).(*kmsg.JoinGroupResponse); r.MemberID != "member-of-park" {
		t.Fatalf("parked join answered %+v", r)
	}
	// Idle again once answered: closed a period later.
	ts.srv.sweepIdle(advance(time.Minute))
	if n := ts.srv.sweepIdle(advance(11 * time.Minute)); n != 2 {
		t.Fatalf("closed %d connections 11 minutes later, want the active and the parked one", n)
	}
	parked.expectClosed()
}
