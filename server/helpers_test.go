package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// call is what the fake Groups saw of one request.
type call struct {
	client  Client
	key     int16
	version int16
	req     kmsg.Request
}

// fakeGroups answers every group request with its ResponseKind, after
// recording it. A JoinGroup whose GroupID is "park" blocks until release is
// closed or its ctx is cancelled (recording the cancellation).
type fakeGroups struct {
	mu        sync.Mutex
	calls     []call
	release   chan struct{}
	parked    chan struct{} // receives when a "park" join starts waiting
	cancelled chan struct{} // receives when a parked join saw ctx.Done
	// hook, if set, replaces the default answer.
	hook func(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error)
}

func newFakeGroups() *fakeGroups {
	return &fakeGroups{
		release:   make(chan struct{}),
		parked:    make(chan struct{}, 8),
		cancelled: make(chan struct{}, 8),
	}
}

func (f *fakeGroups) Handle(ctx context.Context, c Client, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{client: c, key: req.Key(), version: req.GetVersion(), req: req})
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		return hook(ctx, c, req)
	}
	resp := req.ResponseKind()
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		jr := resp.(*kmsg.JoinGroupResponse)
		jr.MemberID = "member-of-" + r.Group
		if r.Group == "park" {
			f.parked <- struct{}{}
			select {
			case <-f.release:
			case <-ctx.Done():
				f.cancelled <- struct{}{}
				return nil, ctx.Err()
			}
		}
	case *kmsg.HeartbeatRequest:
		// Echo something request-specific so tests can tell
		// responses apart: 27 REBALANCE_IN_PROGRESS for generation 27.
		if r.Generation == 27 {
			resp.(*kmsg.HeartbeatResponse).ErrorCode = 27
		}
	}
	return resp, nil
}

func (f *fakeGroups) snapshot() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// testServer is a running server on 127.0.0.1:0 with a fake Groups.
type testServer struct {
	srv    *Server
	groups *fakeGroups
	topo   *SingleNodeTopology
	addr   string
	done   chan error
}

type serverOpt func(*Config)

func startServer(t testing.TB, opts ...serverOpt) *testServer {
	t.Helper()
	g := newFakeGroups()
	topo := SingleNode(Broker{NodeID: 0, Host: "127.0.0.1"}, "test-cluster")
	cfg := Config{
		Listen:   "127.0.0.1:0",
		Groups:   g,
		Topology: topo,
		Catalog:  catalog.New(catalog.Options{}),
		Logger:   slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	p, _ := strconv.Atoi(port)
	topo.SetSelf(Broker{NodeID: 0, Host: host, Port: int32(p)})
	ts := &testServer{srv: srv, groups: g, topo: topo, addr: srv.Addr().String(), done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		srv.Close()
		select {
		case err := <-ts.done:
			if err != nil {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return ts
}

func withRegistry(reg prometheus.Registerer) serverOpt {
	return func(c *Config) { c.Registerer = reg }
}

func withMaxFrame(n int32) serverOpt { return func(c *Config) { c.MaxFrameBytes = n } }

// kgoClient returns a franz-go client seeded with the server.
func (ts *testServer) kgoClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ts.addr), kgo.ClientID("kgo-test")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawConn writes hand-made frames and reads replies, for explicit versions
// and for malformed input.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func (ts *testServer) dial(t testing.TB) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(15 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// writeRaw writes b as is.
func (r *rawConn) writeRaw(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// send frames req (header v1/v2 per its version) with client id "raw".
func (r *rawConn) send(req kmsg.Request, corr int32) {
	r.t.Helper()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	r.writeRaw(f.AppendRequest(nil, req, corr))
}

// recvFrame reads one response frame: correlation id and the rest.
func (r *rawConn) recvFrame() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, errors.New("bad response size " + strconv.Itoa(int(n)))
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r.nc, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// recv reads the response to a request of kind req (at req's version) and
// checks its correlation id.
func (r *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	r.t.Helper()
	gotCorr, body, err := r.recvFrame()
	if err != nil {
		r.t.Fatalf("reading response to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if gotCorr != corr {
		r.t.Fatalf("correlation id %d, want %d", gotCorr, corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			r.t.Fatalf("flexible response header: want an empty tag buffer, got % x", body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// roundTrip sends req and returns its response.
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.send(req, 7)
	return r.recv(req, 7)
}

// expectClosed asserts that the server closes the connection (without
// answering) within a few seconds.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := r.nc.Read(b[:])
	if err == nil {
		r.t.Fatalf("server answered (%d bytes) instead of closing the connection", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatal("connection still open 5s after a bad request")
	}
}

// frame builds size + header v1 + body by hand.
func frame(key, version int16, corr int32, clientID string, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
