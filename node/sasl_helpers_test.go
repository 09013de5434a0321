package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	xscram "github.com/xdg-go/scram"
)

func plainMech(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

// atomicTime is a settable clock.
type atomicTime struct{ ns atomic.Int64 }

func (a *atomicTime) set(t time.Time)     { a.ns.Store(t.UnixNano()) }
func (a *atomicTime) add(d time.Duration) { a.ns.Add(int64(d)) }
func (a *atomicTime) get() time.Time      { return time.Unix(0, a.ns.Load()) }

// rawSASL drives SaslHandshake/SaslAuthenticate by hand on one
// connection, with xdg-go/scram as the client.
type rawSASL struct {
	nc   net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawSASL {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawSASL{nc: nc}
}

func (r *rawSASL) send(t *testing.T, req kmsg.Request) {
	t.Helper()
	r.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	if _, err := r.nc.Write(f.AppendRequest(nil, req, r.corr)); err != nil {
		t.Fatal(err)
	}
}

func (r *rawSASL) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	r.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	if _, err := r.nc.Write(f.AppendRequest(nil, req, r.corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(r.nc, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.nc, buf); err != nil {
		return nil, err
	}
	body := buf[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	return resp, resp.ReadFrom(body)
}

// scramLoginErr runs a SCRAM-SHA-512 exchange; the session lifetime on
// success is dropped.
func (r *rawSASL) scramLoginErr(user, pass string) error {
	_, err := r.scram(user, pass)
	return err
}

func (r *rawSASL) scramLogin(t *testing.T, user, pass string) int64 {
	t.Helper()
	life, err := r.scram(user, pass)
	if err != nil {
		t.Fatal(err)
	}
	return life
}

func (r *rawSASL) scram(user, pass string) (int64, error) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1 // v0 would switch the connection to raw tokens
	hs.Mechanism = "SCRAM-SHA-512"
	resp, err := r.roundTrip(hs)
	if err != nil {
		return 0, err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return 0, fmt.Errorf("handshake: error %d", code)
	}
	cl, err := xscram.SHA512.NewClient(user, pass, "")
	if err != nil {
		return 0, err
	}
	conv := cl.NewConversation()
	msg, err := conv.Step("")
	for {
		if err != nil {
			return 0, err
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 2
		req.SASLAuthBytes = []byte(msg)
		resp, err := r.roundTrip(req)
		if err != nil {
			return 0, err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if ar.ErrorCode != 0 {
			return 0, fmt.Errorf("authenticate: error %d", ar.ErrorCode)
		}
		msg, err = conv.Step(string(ar.SASLAuthBytes))
		if conv.Done() {
			if err != nil {
				return 0, err
			}
			if !conv.Valid() {
				return 0, errors.New("server signature invalid")
			}
			return ar.SessionLifetimeMillis, nil
		}
	}
}

// heartbeat sends a Heartbeat for an unknown member and returns its error
// code.
func (r *rawSASL) heartbeat(t *testing.T) int16 {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID = "g", "nobody"
	resp, err := r.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.HeartbeatResponse).ErrorCode
}

func (r *rawSASL) expectClosed(t *testing.T) {
	t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := r.nc.Read(b[:])
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed: %v", err)
	}
}
