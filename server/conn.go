package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/security/sasl"
)

// request is one decoded request frame.
type request struct {
	key      int16
	version  int16
	corr     int32
	clientID string
	// req is the decoded body; nil for an ApiVersions request of a version
	// cohort does not serve (answered with UNSUPPORTED_VERSION at v0).
	req kmsg.Request
}

// Frame decoding errors. They close the connection.
var (
	errTruncatedHeader = errors.New("truncated request header")
	errUnknownAPI      = errors.New("unknown or unsupported API key")
	errBadVersion      = errors.New("unsupported API version")
	errMalformedBody   = errors.New("malformed request body")
	errBodyShort       = errors.New("the body ends before its fields do (truncated, or a length or count runs past its end)")
)

// decodeFrame parses one request frame (the bytes after the 4-byte size):
// the request header (v1, or v2 with tagged fields for flexible versions)
// and the body. The request is nil only if the frame is too short for a
// header; with an error it carries what the header said (for the log).
//
// prevClientID is the client id of the connection's previous request: a
// client sends the same one on every request, and an equal id reuses that
// string instead of allocating another.
func decodeFrame(frame []byte, prevClientID string) (*request, error) {
	r := &request{}
	header, err := decodeFrameInto(r, frame, prevClientID, nil)
	if !header {
		return nil, err
	}
	return r, err
}

// decodeFrameInto is decodeFrame into r. If spare is a request of the
// frame's key, the body is decoded into it (its slices reused) instead of a
// new one (see conn.spare). header is false if the frame is too short for a
// request header.
func decodeFrameInto(r *request, frame []byte, prevClientID string, spare kmsg.Request) (header bool, err error) {
	*r = request{}
	if len(frame) < 10 {
		return false, errTruncatedHeader
	}
	r.key = int16(binary.BigEndian.Uint16(frame))
	r.version = int16(binary.BigEndian.Uint16(frame[2:]))
	r.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	// The client id: a nullable string (length -1 for null).
	n := int(int16(binary.BigEndian.Uint16(frame[8:])))
	body := frame[10:]
	if n > 0 {
		if n > len(body) {
			return false, errTruncatedHeader
		}
		if id := body[:n]; string(id) == prevClientID {
			r.clientID = prevClientID
		} else {
			r.clientID = string(id)
		}
		body = body[n:]
	}
	api := lookupAPI(r.key)
	if api == nil {
		return true, fmt.Errorf("%w: key %d", errUnknownAPI, r.key)
	}
	if r.version < api.Min || r.version > api.Max {
		if r.key == keyApiVersions {
			// Kafka answers an ApiVersions it does not understand
			// with its key list at v0, without parsing the body, so
			// that a newer client can retry with a version both
			// speak.
			return true, nil
		}
		return true, fmt.Errorf("%w: %s v%d (cohort serves v%d-v%d)", errBadVersion, api.Name, r.version, api.Min, api.Max)
	}
	req := spare
	if req == nil || req.Key() != r.key || !resetSpare(req) {
		req = kmsg.RequestForKey(r.key)
	}
	req.SetVersion(r.version)
	if req.IsFlexible() {
		var ok bool
		if body, ok = skipTags(body); !ok {
			return true, errTruncatedHeader
		}
	}
	if err := req.ReadFrom(body); err != nil {
		if err.Error() == kbin.ErrNotEnoughData.Error() {
			// kmsg's reader (its own internal copy of kbin, hence the
			// text compared) says "response"; this is a request that
			// ended before its fields did, or whose length or count of
			// some field runs past its end.
			err = errBodyShort
		}
		return true, fmt.Errorf("%w: %s v%d: %w", errMalformedBody, api.Name, r.version, err)
	}
	if len(body) > maxStringLen && req.IsFlexible() {
		if err := checkStrings(req); err != nil {
			return true, fmt.Errorf("%w: %s v%d: %w", errMalformedBody, api.Name, r.version, err)
		}
	}
	r.req = req
	return true, nil
}

// resetSpare empties a spare request for decoding into it, keeping the
// backing array of its list of topics; false for a kind of request that is
// not reused. Every field goes back to its zero value first: kmsg's decoder
// sets only the fields of the frame's version, and a field of another
// version must not survive from the previous request.
func resetSpare(req kmsg.Request) bool {
	switch x := req.(type) {
	case *kmsg.HeartbeatRequest:
		*x = kmsg.HeartbeatRequest{}
	case *kmsg.OffsetCommitRequest:
		topics := x.Topics[:0]
		*x = kmsg.OffsetCommitRequest{Topics: topics}
	default:
		return false
	}
	return true
}

// skipTags returns b after the tagged-field section it starts with (request
// header v2: an unsigned varint count, then per field its tag, its size and
// its bytes); false if b ends first. (kmsg.SkipTags does the same on a
// kbin.Reader, which escaped to the heap here: one allocation per request.)
func skipTags(b []byte) ([]byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, false
	}
	b = b[k:]
	for ; n > 0; n-- {
		if _, k = binary.Uvarint(b); k <= 0 { // the tag
			return nil, false
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, false
		}
		b = b[k+int(size):]
	}
	return b, true
}

// appendResponse appends the framed response (size, correlation id, header
// tags for flexible versions except ApiVersions, body) to dst. A string of
// resp too long for the protocol is cut in what is written (cutLongStrings;
// resp is left as it is); cut names the fields, for the caller to log.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) (out []byte, cut []string) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, corr)
	if resp.IsFlexible() && resp.Key() != keyApiVersions {
		dst = append(dst, 0) // response header v1: empty tag buffer
	}
	body := len(dst)
	dst = resp.AppendTo(dst)
	if len(dst)-body > maxStringLen {
		var fitted kmsg.Response
		if fitted, cut = cutLongStrings(resp); cut != nil {
			dst = fitted.AppendTo(dst[:body])
		}
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, cut
}

// readFrame reads size bytes. A frame of up to direct bytes is read into a
// buffer of its announced size; a larger one into a buffer that grows with
// the data actually received, so a client announcing a large frame and
// sending little cannot make the server allocate the whole announced size.
func readFrame(r io.Reader, size, direct int32) ([]byte, error) {
	if size <= direct {
		buf := make([]byte, size)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	var b bytes.Buffer
	b.Grow(int(direct))
	n, err := io.CopyN(&b, r, int64(size))
	if err == io.EOF && n < int64(size) {
		err = io.ErrUnexpectedEOF
	}
	return b.Bytes(), err
}

// conn is one client connection, served by one goroutine that reads a
// request, answers it, writes the response and only then reads the next, as
// a Kafka broker mutes a connection while it handles a request. Requests a
// client pipelines wait in the socket and the read buffer. A request that
// can park (JoinGroup, SyncGroup) is watched for a hang-up meanwhile, which
// cancels it.
type conn struct {
	s       *Server
	counted bool // counted against the connection limits (under s.mu)
	// external: the connection came from a listener (not ServeConn's
	// in-process ones, which the idle check leaves alone).
	external bool
	// idleSince is when the connection last became idle, waiting for a
	// request (the idle clock, Unix ns); 0 while a request is answered.
	idleSince atomic.Int64
	ip        netip.Addr // its remote address, when counted
	l         *listener
	lm        *listenerMetrics // the listener's metrics (nil: none)
	auth      connAuth
	nc        net.Conn
	br        *bufio.Reader
	host      string
	log       *slog.Logger
	ctx       context.Context // cancelled on hang-up, protocol error or shutdown
	cancel    context.CancelFunc
	once      sync.Once
	wbuf      []byte
	fbuf      []byte // reusable frame buffer (see frameFree)
	// held is the share of the server's request budget the request being
	// served holds (reqbudget.go); 0 for a small one.
	held int64
	// cur is the request being served (one at a time), and spare the last
	// frame-free request, decoded into again when the next one is of its
	// kind (resetSpare): two allocations less per heartbeat or commit.
	cur   request
	spare kmsg.Request
	// clientID is the client id of the last request (decodeFrame reuses
	// the string while the client sends the same).
	clientID string
	// produceLogged: a refused Produce was logged (once per connection).
	produceLogged bool
	// software is the client software the connection is counted under
	// (software.go; zero: not counted, without metrics).
	software clientSoftware
	// named is the client software the connection named last, for its log
	// lines (logger); zero until it names one.
	named clientSoftware
	// watch runs watchPeek once a request that can park has been handled
	// for hangupWatchDelay (nil before the connection's first such
	// request); watchDone receives once per run of watchPeek.
	watch     *time.Timer
	watchDone chan struct{}
}

func newConn(s *Server, nc net.Conn, l *listener) *conn {
	remote := nc.RemoteAddr().String()
	host := remoteHost(nc)
	if l.IsTLS() {
		nc = tls.Server(nc, l.TLS)
	}
	ctx, cancel := context.WithCancel(s.baseCtx)
	// Every line about the connection names the client's address and the
	// listener it came in on: with several listeners, the operator must
	// see which one a misconfigured client is hitting.
	return &conn{
		s:      s,
		l:      l,
		nc:     nc,
		br:     bufio.NewReaderSize(nc, readBufferBytes),
		host:   host,
		lm:     s.metrics.listener(l.Name),
		log:    s.log.With("remote", remote, "listener", l.Name),
		ctx:    ctx,
		cancel: cancel,
	}
}

// close cancels the connection's context and closes the socket.
func (c *conn) close() {
	c.once.Do(func() {
		c.cancel()
		c.nc.Close()
	})
}

// drain stops reading new requests; the connection writes the response it
// is working on (its context is already cancelled) and then ends.
func (c *conn) drain() {
	c.cancel()
	c.nc.SetReadDeadline(time.Now())
}

// recoverBug turns a panic into a logged bug and a closed connection: the
// last line of defence, so one bad request cannot take the server down.
func (c *conn) recoverBug(where string) {
	if p := recover(); p != nil {
		c.logger().Error("BUG: panic while serving a connection; closing it", "where", where, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		c.close()
	}
}

func (c *conn) run() {
	defer c.s.wg.Done()
	defer c.s.removeConn(c)
	c.lm.connOpened()
	defer c.lm.connClosed()
	if c.s.metrics != nil {
		c.s.metrics.software.move(&c.software, unknownSoftware)
		defer c.s.metrics.software.move(&c.software, clientSoftware{})
	}
	defer c.close()
	defer c.releaseBudget() // also after a panic (recoverBug runs first)
	defer c.recoverBug("serve")
	if !c.startAuth() {
		return
	}
	for c.ctx.Err() == nil { // no new request once cancelled
		r := c.readRequest()
		if r == nil {
			return
		}
		ok := c.serveOne(r)
		c.releaseBudget()
		// Answered: the decoded request must not live on until the
		// connection's next one (a large one, kept by every idle
		// connection, would defeat the budget). A reused one stays as
		// c.spare.
		c.cur.req = nil
		if !ok {
			return
		}
	}
}

// releaseBudget gives back the request budget the current request holds.
func (c *conn) releaseBudget() {
	c.s.budget.release(c.held)
	c.held = 0
}

// readRequest reads and decodes the next request; nil (after logging why)
// when the connection must end.
func (c *conn) readRequest() *request {
	// The size prefix, read in the reader's buffer (a local array would
	// escape through the io.Reader interface: an allocation per request).
	sizeBuf, err := c.br.Peek(4)
	if err != nil {
		if len(sizeBuf) > 0 && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if c.ctx.Err() == nil && !errors.Is(err, io.EOF) {
			c.logger().Debug("connection read failed", "err", err)
		}
		return nil
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf))
	c.br.Discard(4)
	maxFrame, msg := c.s.cfg.MaxFrameBytes, "closing connection: bad request size"
	if c.auth.unauthenticated() && maxFrame > maxUnauthenticatedFrameBytes {
		maxFrame, msg = maxUnauthenticatedFrameBytes, "closing connection: request too large before SASL authentication"
	}
	if size < 0 || size > maxFrame {
		if tlsRecordPrefix(size) && !c.l.IsTLS() {
			c.logBadRequest("closing connection: TLS handshake on a listener without TLS (is the client set up for SSL or SASL_SSL?)",
				"protocol", c.l.Protocol)
			c.s.metrics.protocolError("tls_handshake")
			return nil
		}
		c.logBadRequest(msg, "size", size, "max", maxFrame)
		c.s.metrics.protocolError("frame_size")
		return nil
	}
	// Only requests that keep nothing of their frame are read into the
	// connection's reusable buffer. Any other frame gets a buffer of its
	// own size: a group may keep sub-slices of it (JoinGroup metadata,
	// SyncGroup assignments) as long as it lives, and a 4 KiB buffer kept
	// for a 150-byte SyncGroup was most of an idle group's memory.
	reuse := false
	if size <= reuseFrameBytes && size >= 2 {
		if k, err := c.br.Peek(2); err == nil {
			reuse = frameFree(int16(binary.BigEndian.Uint16(k)))
		}
	}
	var frame []byte
	if reuse {
		if cap(c.fbuf) < int(size) {
			c.fbuf = make([]byte, (int(size)+reuseFrameStep-1)/reuseFrameStep*reuseFrameStep)
		}
		frame = c.fbuf[:size]
		_, err = io.ReadFull(c.br, frame)
	} else {
		frame, err = readFrame(c.br, size, c.directFrameBytes())
	}
	if err != nil {
		if c.ctx.Err() == nil {
			c.logger().Debug("connection closed mid-frame", "size", size, "err", err)
		}
		return nil
	}
	var spare kmsg.Request
	if reuse {
		spare = c.spare
	}
	// The request is complete: the connection is busy from now until its
	// response is written (serveOne), also while it waits for the budget.
	c.idleSince.Store(0)
	held, err := c.s.budget.acquire(c.ctx, int64(size), c.s.metrics.budgetWait)
	if err != nil {
		return nil // the server is closing
	}
	c.held = held
	r := &c.cur
	header, err := decodeFrameInto(r, frame, c.clientID, spare)
	if err != nil {
		c.releaseBudget()
		attrs := []any{"err", err}
		if header {
			attrs = append(attrs, "api_key", r.key, "api_version", r.version, "client_id", sasl.LogText(r.clientID))
		}
		c.logBadRequest("closing connection: bad request", attrs...)
		c.s.metrics.protocolError(decodeReason(err))
		return nil
	}
	if err := checkEntries(r.req, c.s.cfg.MaxRequestPartitions); err != nil {
		c.releaseBudget()
		c.logBadRequest("closing connection: bad request", "err", err, "api_key", r.key, "api_version", r.version, "client_id", sasl.LogText(r.clientID))
		c.s.metrics.protocolError("too_many_entries")
		return nil
	}
	c.clientID = r.clientID
	if reuse && c.s.cfg.Tap == nil {
		// Nothing holds a frame-free request once it is answered (the
		// connection serves one request at a time, and a Tap might keep
		// it: then none is reused).
		c.spare = r.req
	}
	return r
}

// tlsRecordPrefix reports whether a frame's size prefix is the start of a
// TLS handshake record (content type 22, protocol version 3.0 to 3.4): what
// a client set up for TLS sends first, read by a listener without TLS as a
// request of about 369 MB. Only a size the listener refuses anyway is
// looked at.
func tlsRecordPrefix(size int32) bool {
	return uint32(size)>>16 == 0x1603 && uint32(size)>>8&0xff <= 4
}

// logBadRequest logs why a connection is closed for a bad request, at most
// burstLogMax lines per window over all connections (burstLog); the line
// after a quiet spell says how many were left out.
func (c *conn) logBadRequest(msg string, attrs ...any) { c.s.badLog.info(c.logger(), msg, attrs...) }

// directFrameBytes is the largest frame read into a buffer of its announced
// size (readFrame): 64 KiB, or 4 KiB before a SASL connection has
// authenticated, so that thousands of unauthenticated connections that
// announce a frame and stall hold little until the authentication timeout
// closes them.
func (c *conn) directFrameBytes() int32 {
	if c.auth.unauthenticated() {
		return 4 << 10
	}
	return 64 << 10
}

// logAuthFailure logs a failed or refused authentication, at most
// burstLogMax lines per window over all connections (authLog), so that a
// client guessing passwords in a loop cannot flood the log; the metrics
// count every one, and the line after a quiet spell says how many were left
// out.
func (c *conn) logAuthFailure(msg string, attrs ...any) { c.s.authLog.info(c.logger(), msg, attrs...) }

// readBufferBytes is the size of a connection's read buffer. Buffered, a
// request's size prefix and body arrive in one read system call instead of
// two when they fit: heartbeats, commits of up to about a hundred
// partitions, most JoinGroups. A larger frame's rest is read straight into
// its own buffer, one more system call for a request that costs far more
// anyway. Every connection holds this buffer as long as it lives, most of
// them idle (a consumer between heartbeats): 16 KiB, as before, was more
// than half of what an idle consumer's connection cost (TestConnMemory).
const readBufferBytes = 2 << 10

// reuseFrameBytes is the largest frame read into the connection's reusable
// buffer, which grows to the largest such frame seen, in steps of
// reuseFrameStep: a connection that only heartbeats keeps 256 bytes.
const (
	reuseFrameBytes = 4 << 10
	reuseFrameStep  = 256
)

// frameFree reports whether a decoded request of API key is independent of
// its frame's bytes: kmsg copies strings, and these requests have no byte
// fields (unknown tagged fields may point into the frame, but nothing keeps
// them past the request). Their frames' buffer is reused for the next
// request: the hot path (heartbeats, commits, fetches) allocates no frame.
func frameFree(key int16) bool {
	if key == keyFetch {
		return true
	}
	a := group.LookupAPI(key)
	return a != nil && a.FrameFree
}

// longAgo is a read deadline in the past: it wakes a blocked read at once.
var longAgo = time.Unix(1, 0)

// hangupWatchDelay is how long a request that can park is handled before
// its connection is watched for a hang-up. Most such requests are answered
// sooner (the JoinGroups and SyncGroups of a rebalance of a thousand members
// within tens of milliseconds), and a watch costs a goroutine, a read system
// call and two deadline changes: a tenth of the server's CPU in such a
// rebalance. A client that hangs up while parked is noticed at most this
// much later, which changes nothing for its group (the coordinator answers
// a parked request whether or not anybody still waits for it); only its
// connection's goroutine lives that much longer. Config.hangupWatchDelay
// replaces it in tests.
const hangupWatchDelay = time.Second

// startWatch arms the hang-up watch for the request being handled: unless
// stopWatch comes first, watchPeek runs after hangupWatchDelay.
func (c *conn) startWatch() {
	if c.watch == nil {
		c.watchDone = make(chan struct{}, 1)
		c.watch = time.AfterFunc(c.s.cfg.hangupWatchDelay, c.watchPeek)
		return
	}
	c.watch.Reset(c.s.cfg.hangupWatchDelay)
}

// stopWatch ends the watch started by startWatch and returns once the
// watcher no longer touches the reader.
func (c *conn) stopWatch() {
	if c.watch.Stop() {
		return // never ran
	}
	c.nc.SetReadDeadline(longAgo)
	<-c.watchDone
	if c.ctx.Err() == nil {
		c.nc.SetReadDeadline(time.Time{})
	}
}

// watchPeek watches the socket while a request that can park is handled:
// if the client hangs up (or the socket fails), the connection's context is
// cancelled, which abandons the parked request. Bytes of a request the
// client pipelines end the watch and stay buffered for the next read.
func (c *conn) watchPeek() {
	defer func() { c.watchDone <- struct{}{} }()
	defer c.recoverBug("watch")
	if _, err := c.br.Peek(1); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return // stopped (or drained): not a hang-up
		}
		c.cancel()
	}
}

func decodeReason(err error) string {
	switch {
	case errors.Is(err, errTruncatedHeader):
		return "truncated_header"
	case errors.Is(err, errUnknownAPI):
		return "unknown_api"
	case errors.Is(err, errBadVersion):
		return "unsupported_version"
	default:
		return "malformed_body"
	}
}

// serveOne answers r and writes the response; false closes the connection.
func (c *conn) serveOne(r *request) bool {
	start := time.Now()
	if !c.admit(r) {
		if resp := c.refusalAnswer(r); resp != nil {
			c.wbuf, _ = appendResponse(c.wbuf[:0], r.corr, resp)
			c.nc.Write(c.wbuf) // best effort: the connection closes next
		}
		return false
	}
	watched := false
	if a := group.LookupAPI(r.key); a != nil && a.Parks {
		// It may wait for other members, whose requests may need the
		// budget: decoded, it holds no share of it.
		c.releaseBudget()
		c.startWatch()
		watched = true
	}
	var resp kmsg.Response
	var err error
	closeAfter := false
	if r.key == keyApiVersions {
		c.noteSoftware(r)
	}
	switch r.key {
	case keySaslHandshake:
		resp, closeAfter = c.saslHandshake(r)
	case keySaslAuthenticate:
		resp, closeAfter = c.saslAuthenticate(r)
	default:
		resp, err = c.s.handle(c.ctx, Client{ID: r.clientID, Host: c.host, Principal: c.auth.principal, Listener: c.l.Name}, r)
	}
	if watched {
		c.stopWatch()
	}
	c.releaseBudget() // answered: what is left is the response
	if err != nil {
		if c.ctx.Err() == nil {
			c.logger().Warn("closing connection: request failed", "api", kmsg.NameForKey(r.key), "api_version", r.version, "client_id", sasl.LogText(r.clientID), "err", err)
		}
		return false
	}
	if !c.afterDataPlane(r, resp, start) { // Fetch hold, Produce refusal
		return false
	}
	var cut []string
	c.wbuf, cut = appendResponse(c.wbuf[:0], r.corr, resp)
	if cut != nil {
		// At most burstLogMax lines a window: a client can repeat the
		// request whose answer quotes its over-long id.
		c.s.cutLog.log(c.logger(), slog.LevelWarn, "strings too long for the protocol cut in a response", "api", kmsg.NameForKey(r.key), "api_version", r.version, "fields", cut)
	}
	// The tap sees the answer before the client does, so that whatever
	// the client does next (a test checking what the node recorded, a
	// worker exiting after its LeaveGroup) comes after the record.
	if tap := c.s.cfg.Tap; tap != nil && r.req != nil && r.key != keySaslHandshake && r.key != keySaslAuthenticate {
		tap(Client{ID: r.clientID, Host: c.host, Principal: c.auth.principal, Listener: c.l.Name}, r.req, resp)
	}
	// Idle from now: stamped before the write, so that a client holding
	// the answer knows the connection counts as idle (tests rely on it).
	c.idleSince.Store(c.s.idleClock.Load())
	if _, err := c.nc.Write(c.wbuf); err != nil {
		if c.ctx.Err() == nil {
			c.logger().Debug("connection write failed", "err", err)
		}
		return false
	}
	if cap(c.wbuf) > 1<<20 { // do not keep a large Metadata buffer per idle connection
		c.wbuf = nil
	}
	c.s.metrics.observe(r.key, resp, time.Since(start))
	if closeAfter {
		return false
	}
	if c.auth.state == saslRaw {
		return c.saslRawExchange()
	}
	return true
}
