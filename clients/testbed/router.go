// Package testbed is the test-only harness the stock-client tests run on: a
// data plane (franz-go's in-process kfake cluster) and a cohort node behind a
// small router that presents both as one Kafka broker.
//
// The router forwards the ten group APIs to cohort and every other request to
// kfake, byte for byte. It answers ApiVersions and FindCoordinator itself and
// rewrites the broker list of Metadata (and DescribeCluster) to its own
// address, so that a client sees one broker that leads every partition and
// coordinates every group. Like a Kafka broker it serves the requests of one
// client connection in order, one at a time. It records what it forwards to
// cohort (joins, syncs, commits) in a Journal that the tests check.
package testbed

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/server"
)

// API keys the router treats specially.
const (
	keyProduce         = 0
	keyMetadata        = 3
	keyOffsetCommit    = 8
	keyOffsetFetch     = 9
	keyFindCoordinator = 10
	keyJoinGroup       = 11
	keyHeartbeat       = 12
	keyLeaveGroup      = 13
	keySyncGroup       = 14
	keyDescribeGroups  = 15
	keyListGroups      = 16
	keyApiVersions     = 18
	keyDeleteGroups    = 42
	keyOffsetDelete    = 47
	keyDescribeCluster = 60

	keyConsumerGroupHeartbeat = 68
	keyConsumerGroupDescribe  = 69
)

// IsGroupKey reports whether the router sends requests of this key to cohort.
func IsGroupKey(key int16) bool {
	switch key {
	case keyOffsetCommit, keyOffsetFetch, keyJoinGroup, keyHeartbeat, keyLeaveGroup,
		keySyncGroup, keyDescribeGroups, keyListGroups, keyDeleteGroups, keyOffsetDelete,
		keyConsumerGroupHeartbeat, keyConsumerGroupDescribe:
		return true
	}
	return false
}

// Router presents kfake (data) and cohort (groups) as one broker.
type Router struct {
	ln       net.Listener
	host     string
	port     int32
	nodeID   int32
	dataAddr string
	groups   atomic.Pointer[string] // cohort's address; replaceable (restart tests)
	versions []kmsg.ApiVersionsResponseApiKey
	apiMax   int16 // highest ApiVersions version answered

	Journal *Journal

	// ids translates topic ids between kfake and cohort (KIP-848 requests
	// carry them; see topicids.go).
	ids topicIDs

	mu      sync.Mutex
	conns   map[*rconn]struct{}
	blocked map[string]bool // client ids whose connections are refused
	closed  bool
	wg      sync.WaitGroup
}

// NewRouter listens on 127.0.0.1:0 and routes to dataAddr (kfake) and
// groupAddr (cohort). The router's broker has node id nodeID.
func NewRouter(dataAddr, groupAddr string, nodeID int32) (*Router, error) {
	r := &Router{
		nodeID:   nodeID,
		dataAddr: dataAddr,
		Journal:  NewJournal(),
		conns:    map[*rconn]struct{}{},
		blocked:  map[string]bool{},
	}
	r.groups.Store(&groupAddr)
	r.ids.refresh = func() error { return r.ids.fetch(dataAddr) }
	dataKeys, err := fetchVersions(dataAddr)
	if err != nil {
		return nil, fmt.Errorf("ApiVersions from the data cluster: %w", err)
	}
	r.versions, r.apiMax = mergeVersions(dataKeys, server.SupportedAPIs())
	r.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h, p, _ := net.SplitHostPort(r.ln.Addr().String())
	port, _ := strconv.Atoi(p)
	r.host, r.port = h, int32(port)
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the router's host:port, the only bootstrap address clients need.
func (r *Router) Addr() string { return r.ln.Addr().String() }

// SetGroupAddr points the group APIs at another cohort address. Existing
// connections keep their upstream until it fails.
func (r *Router) SetGroupAddr(addr string) { r.groups.Store(&addr) }

// Block cuts every connection whose requests carry this client id and refuses
// its later requests (the connection is closed on its first request), as if
// the client's process had died: nothing it sends reaches cohort any more.
func (r *Router) Block(clientID string) {
	r.mu.Lock()
	r.blocked[clientID] = true
	var cut []*rconn
	for c := range r.conns {
		if c.clientID.Load() != nil && *c.clientID.Load() == clientID {
			cut = append(cut, c)
		}
	}
	r.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

// Unblock lets a blocked client id connect again.
func (r *Router) Unblock(clientID string) {
	r.mu.Lock()
	delete(r.blocked, clientID)
	r.mu.Unlock()
}

// DropGroupConns closes every client connection that has talked to cohort,
// as a crash of cohort would (used with a restart).
func (r *Router) DropGroupConns() {
	r.mu.Lock()
	var cut []*rconn
	for c := range r.conns {
		if c.usedGroups.Load() {
			cut = append(cut, c)
		}
	}
	r.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

func (r *Router) isBlocked(clientID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.blocked[clientID]
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (r *Router) Close() {
	r.mu.Lock()
	r.closed = true
	var all []*rconn
	for c := range r.conns {
		all = append(all, c)
	}
	r.mu.Unlock()
	r.ln.Close()
	for _, c := range all {
		c.close()
	}
	r.wg.Wait()
}

func (r *Router) accept() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			return
		}
		c := &rconn{r: r, nc: nc, done: make(chan struct{})}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			nc.Close()
			return
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			c.run()
			r.mu.Lock()
			delete(r.conns, c)
			r.mu.Unlock()
		}()
	}
}

// rconn is one client connection and its two lazily dialled upstreams.
type rconn struct {
	r          *Router
	nc         net.Conn
	clientID   atomic.Pointer[string]
	usedGroups atomic.Bool
	once       sync.Once
	done       chan struct{}

	umu    sync.Mutex // guards the upstream fields against close
	data   *upstream
	groups *upstream
}

type upstream struct {
	nc net.Conn
	rd *bufio.Reader
}

func (c *rconn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
		c.umu.Lock()
		for _, u := range []*upstream{c.data, c.groups} {
			if u != nil {
				u.nc.Close()
			}
		}
		c.umu.Unlock()
	})
}

// run reads frames on one goroutine (so that a client hanging up is noticed,
// and its parked request upstream cancelled, while a request is served) and
// serves them in order on this one.
func (c *rconn) run() {
	defer c.close()
	frames := make(chan []byte, 8)
	go func() {
		defer close(frames)
		rd := bufio.NewReader(c.nc)
		for {
			f, err := readFrame(rd)
			if err != nil {
				c.close()
				return
			}
			select {
			case frames <- f:
			case <-c.done:
				return
			}
		}
	}()
	var wbuf []byte
	for f := range frames {
		resp, err := c.serve(f)
		if err != nil {
			return
		}
		if resp == nil {
			continue // Produce with acks=0
		}
		wbuf = appendFrame(wbuf[:0], resp)
		if _, err := c.nc.Write(wbuf); err != nil {
			return
		}
	}
}

// header is the part of a request header the router reads.
type header struct {
	key, version int16
	corr         int32
	clientID     string
	bodyAt       int // offset of the body in the frame (after header tags)
}

func parseHeader(f []byte) (header, error) {
	rd := kbin.Reader{Src: f}
	h := header{key: rd.Int16(), version: rd.Int16(), corr: rd.Int32()}
	id := rd.NullableString()
	if !rd.Ok() {
		return h, errors.New("truncated request header")
	}
	if id != nil {
		h.clientID = *id
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, fmt.Errorf("unknown API key %d", h.key)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() { // request header v2 (ApiVersions v3+ too)
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			return h, errors.New("truncated request header tags")
		}
	}
	h.bodyAt = len(f) - len(rd.Src)
	return h, nil
}

// decodeRequest decodes the body of a request frame.
func decodeRequest(h header, f []byte) (kmsg.Request, error) {
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if err := req.ReadFrom(f[h.bodyAt:]); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeResponse decodes a response frame (correlation id first) to req's
// response kind.
func decodeResponse(req kmsg.Request, f []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	rd := kbin.Reader{Src: f}
	rd.Int32()
	if resp.IsFlexible() && resp.Key() != keyApiVersions {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return nil, errors.New("truncated response header")
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, err
	}
	return resp, nil
}

// encodeResponse is a response frame body: correlation id, header tags for
// flexible versions (never for ApiVersions), body.
func encodeResponse(corr int32, resp kmsg.Response) []byte {
	b := kbin.AppendInt32(nil, corr)
	if resp.IsFlexible() && resp.Key() != keyApiVersions {
		b = append(b, 0)
	}
	return resp.AppendTo(b)
}

func (c *rconn) serve(f []byte) ([]byte, error) {
	h, err := parseHeader(f)
	if err != nil {
		return nil, err
	}
	if h.clientID != "" {
		id := h.clientID
		c.clientID.Store(&id)
		if c.r.isBlocked(id) {
			return nil, errors.New("client blocked")
		}
	}
	switch {
	case h.key == keyApiVersions:
		return c.r.apiVersions(h), nil
	case h.key == keyFindCoordinator:
		req, err := decodeRequest(h, f)
		if err != nil {
			return nil, err
		}
		return encodeResponse(h.corr, c.r.findCoordinator(req.(*kmsg.FindCoordinatorRequest))), nil
	case h.key == keyConsumerGroupHeartbeat || h.key == keyConsumerGroupDescribe:
		c.usedGroups.Store(true)
		return c.serveKIP848(h, f)
	case IsGroupKey(h.key):
		c.usedGroups.Store(true)
		requested := time.Now()
		var req kmsg.Request
		if h.key == keyOffsetCommit || h.key == keyOffsetFetch || h.key == keyJoinGroup || h.key == keySyncGroup {
			if req, err = decodeRequest(h, f); err != nil {
				return nil, err
			}
		}
		if q, ok := req.(*kmsg.OffsetCommitRequest); ok {
			c.r.Journal.sentCommit(q, requested)
		}
		resp, err := c.forward(true, f, true)
		if err != nil {
			return nil, err
		}
		if req != nil {
			c.r.Journal.observe(h.clientID, req, resp, requested)
		}
		return resp, nil
	case h.key == keyMetadata || h.key == keyDescribeCluster:
		req, err := decodeRequest(h, f)
		if err != nil {
			return nil, err
		}
		resp, err := c.forwardDecoded(false, req, f)
		if err != nil {
			return nil, err
		}
		c.r.rewriteBrokers(resp)
		c.r.ids.learn(resp)
		return encodeResponse(h.corr, resp), nil
	case h.key == keyProduce:
		req, err := decodeRequest(h, f)
		if err != nil {
			return nil, err
		}
		acks := req.(*kmsg.ProduceRequest).Acks
		return c.forward(false, f, acks != 0)
	default:
		return c.forward(false, f, true)
	}
}

// forward sends a frame to cohort (groups) or kfake and, if a response is
// expected, returns it. Any upstream failure closes the client connection:
// the client sees what it would see if its broker went away.
func (c *rconn) forward(groups bool, f []byte, wantResp bool) ([]byte, error) {
	c.umu.Lock()
	u := c.data
	if groups {
		u = c.groups
	}
	c.umu.Unlock()
	if u == nil {
		addr := c.r.dataAddr
		if groups {
			addr = *c.r.groups.Load()
		}
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		u = &upstream{nc: nc, rd: bufio.NewReader(nc)}
		c.umu.Lock()
		select {
		case <-c.done:
			c.umu.Unlock()
			nc.Close()
			return nil, errors.New("connection closed")
		default:
		}
		if groups {
			c.groups = u
		} else {
			c.data = u
		}
		c.umu.Unlock()
	}
	if _, err := u.nc.Write(appendFrame(nil, f)); err != nil {
		return nil, err
	}
	if !wantResp {
		return nil, nil
	}
	return readFrame(u.rd)
}

// forwardDecoded forwards frame f of req and decodes the answer.
func (c *rconn) forwardDecoded(groups bool, req kmsg.Request, f []byte) (kmsg.Response, error) {
	raw, err := c.forward(groups, f, true)
	if err != nil {
		return nil, err
	}
	return decodeResponse(req, raw)
}

func readFrame(rd io.Reader) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(rd, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > 256<<20 {
		return nil, fmt.Errorf("bad frame size %d", n)
	}
	f := make([]byte, n)
	_, err := io.ReadFull(rd, f)
	return f, err
}

func appendFrame(dst, f []byte) []byte {
	dst = kbin.AppendInt32(dst, int32(len(f)))
	return append(dst, f...)
}

// fetchVersions asks a broker for its ApiVersions.
func fetchVersions(addr string) ([]kmsg.ApiVersionsResponseApiKey, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "cohort-testbed", "1"
	resp, err := roundTrip(addr, req)
	if err != nil {
		return nil, err
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(av.ErrorCode)
	}
	return av.ApiKeys, nil
}

// roundTrip sends req on a connection of its own to addr and returns the
// answer (the router's own requests: ApiVersions, Metadata).
func roundTrip(addr string, req kmsg.Request) (kmsg.Response, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	msg := kmsg.NewRequestFormatter(kmsg.FormatterClientID("cohort-testbed")).AppendRequest(nil, req, 1)
	if _, err := nc.Write(msg); err != nil {
		return nil, err
	}
	f, err := readFrame(nc)
	if err != nil {
		return nil, err
	}
	return decodeResponse(req, f)
}

// mergeVersions builds the router's ApiVersions table: the data cluster's
// ranges, except that the group APIs take cohort's ranges (OffsetCommit and
// OffsetFetch at most v9: from v10 they name topics by id), FindCoordinator is
// what cohort serves (the router answers it), and re-encoded APIs are capped
// to what kmsg knows. The KIP-848 keys (68, 69) are cohort's, their topic ids
// translated (topicids.go). It returns the table and the ApiVersions max.
func mergeVersions(data []kmsg.ApiVersionsResponseApiKey, cohort []server.APIVersions) ([]kmsg.ApiVersionsResponseApiKey, int16) {
	byKey := map[int16]server.APIVersions{}
	for _, a := range cohort {
		byKey[a.Key] = a
	}
	var out []kmsg.ApiVersionsResponseApiKey
	seen := map[int16]bool{}
	add := func(k kmsg.ApiVersionsResponseApiKey) {
		if k.MinVersion <= k.MaxVersion {
			out = append(out, k)
		}
		seen[k.ApiKey] = true
	}
	for _, k := range data {
		switch {
		case IsGroupKey(k.ApiKey) || k.ApiKey == keyFindCoordinator:
			continue // from cohort's table below
		case k.ApiKey == keyMetadata || k.ApiKey == keyDescribeCluster || k.ApiKey == keyApiVersions || k.ApiKey == keyProduce:
			k.MaxVersion = min(k.MaxVersion, kmsg.RequestForKey(k.ApiKey).MaxVersion())
		}
		add(k)
	}
	for _, a := range cohort {
		if !(IsGroupKey(a.Key) || a.Key == keyFindCoordinator) || seen[a.Key] {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
		if a.Key == keyOffsetCommit || a.Key == keyOffsetFetch {
			k.MaxVersion = min(k.MaxVersion, 9)
		}
		k.MaxVersion = min(k.MaxVersion, kmsg.RequestForKey(a.Key).MaxVersion())
		add(k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	apiMax := int16(0)
	for _, k := range out {
		if k.ApiKey == keyApiVersions {
			apiMax = k.MaxVersion
		}
	}
	return out, apiMax
}

// Versions returns the router's advertised table (a copy).
func (r *Router) Versions() []kmsg.ApiVersionsResponseApiKey {
	return append([]kmsg.ApiVersionsResponseApiKey(nil), r.versions...)
}

func (r *Router) apiVersions(h header) []byte {
	resp := kmsg.NewPtrApiVersionsResponse()
	if h.version > r.apiMax || h.version < 0 {
		// As a broker does: v0, UNSUPPORTED_VERSION, our ApiVersions range.
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		for _, k := range r.versions {
			if k.ApiKey == keyApiVersions {
				resp.ApiKeys = append(resp.ApiKeys, k)
			}
		}
		return encodeResponse(h.corr, resp)
	}
	resp.Version = h.version
	resp.ApiKeys = append(resp.ApiKeys, r.versions...)
	if resp.Version >= 3 {
		// group.version 1, as cohort reports it: clients look for it before
		// using the consumer group protocol (KIP-848).
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: "group.version", MinVersion: 0, MaxVersion: 1}}
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: "group.version", MinVersionLevel: 1, MaxVersionLevel: 1}}
		resp.FinalizedFeaturesEpoch = 1
	}
	return encodeResponse(h.corr, resp)
}

func (r *Router) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port = r.nodeID, r.host, r.port
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, r.nodeID, r.host, r.port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}

// rewriteBrokers makes the router the only broker, the controller, and the
// leader and sole replica of every partition.
func (r *Router) rewriteBrokers(resp kmsg.Response) {
	switch m := resp.(type) {
	case *kmsg.MetadataResponse:
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = r.nodeID, r.host, r.port
		m.Brokers = []kmsg.MetadataResponseBroker{b}
		m.ControllerID = r.nodeID
		for i := range m.Topics {
			for j := range m.Topics[i].Partitions {
				p := &m.Topics[i].Partitions[j]
				p.Leader = r.nodeID
				p.Replicas = []int32{r.nodeID}
				p.ISR = []int32{r.nodeID}
				p.OfflineReplicas = nil
			}
		}
	case *kmsg.DescribeClusterResponse:
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = r.nodeID, r.host, r.port
		m.Brokers = []kmsg.DescribeClusterResponseBroker{b}
		m.ControllerID = r.nodeID
	}
}
