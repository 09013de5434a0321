package server

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/testwait"
)

// apiVersionsOK dials addr and reports whether the server answers an
// ApiVersions request on the new connection, which it leaves open.
func apiVersionsOK(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return nc, answers(nc)
}

// answers reports whether the server answers an ApiVersions on nc.
func answers(nc net.Conn) bool {
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	body := req.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, uint32(8+2+len("t")+len(body)))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 1) // correlation id
	frame = binary.BigEndian.AppendUint16(frame, 1)
	frame = append(frame, 't')
	frame = append(frame, body...)
	if _, err := nc.Write(frame); err != nil {
		return false
	}
	var size [4]byte
	_, err := io.ReadFull(bufio.NewReader(nc), size[:])
	return err == nil
}

// TestConnectionLimits: beyond --max-connections-per-ip a new connection
// from that address is closed at once, as in Kafka; beyond
// --max-connections any new one is; closing a connection frees its place.
// Each refusal is counted by listener and reason.
func TestConnectionLimits(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		total, perIP int
	}{
		{"per IP", refusedMaxConnectionsPerIP, 0, 2},
		{"total", refusedMaxConnections, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			ts := startServer(t, withRegistry(reg), func(c *Config) { c.MaxConnections, c.MaxConnectionsPerIP = tc.total, tc.perIP })
			var open []net.Conn
			defer func() {
				for _, c := range open {
					c.Close()
				}
			}()
			for i := range 2 {
				c, ok := apiVersionsOK(t, ts.addr)
				open = append(open, c)
				if !ok {
					t.Fatalf("connection %d under the limit was not served", i+1)
				}
			}
			c, ok := apiVersionsOK(t, ts.addr)
			c.Close()
			if ok {
				t.Fatal("a third connection was served")
			}
			refused := ts.srv.metrics.listener("PLAINTEXT").refused[tc.reason]
			if v := testutil.ToFloat64(refused); v != 1 {
				t.Errorf("refused %s: %v, want 1", tc.reason, v)
			}
			open[0].Close()
			open = open[1:]
			// The server sees the hang-up on its own time.
			if !testwait.Until(10*time.Second, func() bool {
				c, ok := apiVersionsOK(t, ts.addr)
				open = append(open, c)
				return ok
			}) {
				t.Fatal("no place freed 10s after a connection closed")
			}
			// The console's in-process connections do not count.
			cl, sv := net.Pipe()
			defer cl.Close()
			if err := ts.srv.ServeConn(sv, "PLAINTEXT"); err != nil || !answers(cl) {
				t.Fatalf("in-process connection at the limit not served: %v", err)
			}
		})
	}
}
