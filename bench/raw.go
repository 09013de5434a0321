package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/cohort-dev/cohort/security/clientconfig"
)

// security is Config.Security made ready once per run: the kgo options of
// every client, and the TLS configuration and SASL mechanism of every raw
// connection.
type security struct {
	opts []kgo.Opt
	tls  *tls.Config    // nil: plaintext
	mech sasl.Mechanism // nil: no SASL
}

func newSecurity(c clientconfig.Config) (*security, error) {
	s := &security{}
	var err error
	if s.tls, err = c.TLSConfig(); err != nil {
		return nil, err
	}
	if s.mech, err = c.SASLMechanism(); err != nil {
		return nil, err
	}
	if s.tls != nil {
		s.opts = append(s.opts, kgo.DialTLSConfig(s.tls))
	}
	if s.mech != nil {
		s.opts = append(s.opts, kgo.SASL(s.mech))
	}
	return s, nil
}

// rawConn is one bare Kafka connection: a request written, its response
// read, one at a time, the way a member's connection is used. The
// throughput cases use it so that the load generator, which shares the
// machine with the target, costs as little as possible per request: a kgo
// client spends several goroutine hand-offs per request, more CPU than the
// coordinator it measures.
type rawConn struct {
	nc   net.Conn
	rd   *bufio.Reader // one read syscall for a response's size and body
	f    *kmsg.RequestFormatter
	corr int32
	max  map[int16]int16 // the target's max version per API key
	wbuf []byte
	rbuf []byte
}

// dialRaw connects to addr (with TLS if sec says so), asks for the
// target's API versions (ApiVersions v0, which every Kafka-protocol server
// answers, before authentication too) and authenticates with sec's SASL
// mechanism. sec may be nil: plaintext.
func dialRaw(ctx context.Context, addr, clientID string, sec *security) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if sec != nil && sec.tls != nil {
		cfg := sec.tls.Clone()
		if cfg.ServerName == "" { // as kgo does
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	c := &rawConn{nc: nc, rd: bufio.NewReaderSize(nc, 16<<10), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)), max: map[int16]int16{}}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := c.do(ctx, av, resp); err != nil {
		nc.Close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	if resp.ErrorCode != 0 {
		nc.Close()
		return nil, fmt.Errorf("ApiVersions: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, k := range resp.ApiKeys {
		c.max[k.ApiKey] = k.MaxVersion
	}
	if sec != nil && sec.mech != nil {
		if err := c.authenticate(ctx, sec.mech, addr); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// authenticate runs SaslHandshake v1 and the SaslAuthenticate exchange of
// mech (KIP-152), as kgo does on each of its connections.
func (c *rawConn) authenticate(ctx context.Context, mech sasl.Mechanism, addr string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	var err error
	if hs.Version, err = c.version(hs, 1); err != nil {
		return err
	}
	if hs.Version < 1 {
		return errors.New("target does not serve SaslAuthenticate (SaslHandshake v1)")
	}
	hsr := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.do(ctx, hs, hsr); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if hsr.ErrorCode != 0 {
		return fmt.Errorf("SaslHandshake %s (target offers %v): %w", hs.Mechanism, hsr.SupportedMechanisms, kerr.ErrorForCode(hsr.ErrorCode))
	}
	session, msg, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	// A last client message after the session is done still gets a
	// response (KIP-152).
	for done := false; !done || len(msg) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		if req.Version, err = c.version(req, 2); err != nil {
			return err
		}
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.do(ctx, req, resp); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if resp.ErrorCode != 0 {
			return fmt.Errorf("SaslAuthenticate %s: %w", hs.Mechanism, kerr.ErrorForCode(resp.ErrorCode))
		}
		msg = nil
		if !done {
			if done, msg, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return fmt.Errorf("SASL %s: %w", hs.Mechanism, err)
			}
		}
	}
	return nil
}

// version is the highest version of req's API both sides speak, capped
// at most.
func (c *rawConn) version(req kmsg.Request, most int16) (int16, error) {
	v, ok := c.max[req.Key()]
	if !ok {
		return 0, fmt.Errorf("target does not serve %s", kmsg.NameForKey(req.Key()))
	}
	return min(v, most, req.MaxVersion()), nil
}

// do writes req (its version already set) and reads the response into
// resp.
func (c *rawConn) do(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	} else {
		c.nc.SetDeadline(time.Time{})
	}
	c.corr++
	c.wbuf = c.f.AppendRequest(c.wbuf[:0], req, c.corr)
	if _, err := c.nc.Write(c.wbuf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.rd, size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return fmt.Errorf("response frame of %d bytes", n)
	}
	if cap(c.rbuf) < n {
		c.rbuf = make([]byte, n)
	}
	b := c.rbuf[:n]
	if _, err := io.ReadFull(c.rd, b); err != nil {
		return err
	}
	return parseResponse(b, c.corr, req, resp)
}

// parseResponse decodes a response frame b (after its size: correlation
// id, header, body) to req into resp.
func parseResponse(b []byte, corr int32, req kmsg.Request, resp kmsg.Response) error {
	if len(b) < 4 {
		return fmt.Errorf("response frame of %d bytes", len(b))
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // ApiVersions keeps header v0
		if len(b) == 0 || b[0] != 0 {
			return fmt.Errorf("response header has tagged fields")
		}
		b = b[1:]
	}
	return resp.ReadFrom(b)
}

func (c *rawConn) Close() error { return c.nc.Close() }

// coordinatorAddr asks for group's coordinator through cl.
func coordinatorAddr(ctx context.Context, cl *kgo.Client, group string) (string, error) {
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.CoordinatorKey = group
	r.CoordinatorKeys = []string{group}
	resp, err := r.RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	code, host, port := resp.ErrorCode, resp.Host, resp.Port
	if len(resp.Coordinators) > 0 {
		c := resp.Coordinators[0]
		code, host, port = c.ErrorCode, c.Host, c.Port
	}
	if code != 0 {
		return "", fmt.Errorf("FindCoordinator %s: %w", group, kerr.ErrorForCode(code))
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}
