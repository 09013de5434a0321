// Package cluster runs several cohort nodes on etcd.
//
// Nodes register under <prefix>nodes/<id> with an etcd lease (id, advertised
// host:port, rack). Every node watches the live set and computes the same
// assignment of coordinator partitions to nodes (Assign: a pure function of
// the live set, balanced and moving few partitions when nodes come and go;
// no leader). Ownership itself is enforced through etcd: a node serves
// partition p only while it holds <prefix>own/<p>, created with a compare
// (create revision 0: nobody holds it) and attached to its lease. A node that
// is no longer p's target releases it (stops serving at once, then deletes
// the key with a compare on its create revision); the target acquires it
// when the key is gone and loads it (coordinator.Acquire). Writes compare the
// create revision too (package store/etcd), so a node that lost its key can
// never write.
//
// Lease loss: the node keeps a local deadline, the time of the last
// keepalive request etcd answered plus the lease TTL. etcd cannot expire the
// lease before that moment, so when the deadline passes the node stops
// serving every partition (Serving turns false, which the request path
// checks before anything else) before any other node can acquire one. It
// then starts a new session (new lease) and rejoins. A safety margin
// (Config.SafetyMargin) is kept before the deadline, for clocks that run at
// slightly different rates.
//
// The decisions are a pure function, Decide(View) Actions; the etcd calls go
// through a LeaseStore (EtcdLeases; MemLeases in tests) and time through an
// injected clock, so many-node scenarios run deterministically in tests.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/security/sasl"
	"github.com/cohort-dev/cohort/server"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
)

// Partitions is what the cluster moves: the coordinator.
type Partitions interface {
	Acquire(p int32)
	Release(p int32)
}

// Fence is told which ownership key each served partition goes through, so
// that writes can compare it (store/etcd.Store).
type Fence interface {
	SetOwner(p int32, createRev int64)
	ClearOwner(p int32)
}

// Config configures a Cluster.
type Config struct {
	Client *clientv3.Client
	// Store is the fenced etcd store the coordinator writes to; the
	// cluster tells it which partitions this node owns.
	Store *etcdstore.Store
	// Leases, if set, replaces the etcd lease store made of Client and
	// Store's prefix (tests: MemLeases); Client and Store are then optional.
	Leases LeaseStore
	// Fence, if set, replaces Store as the fence told about ownership.
	Fence     Fence
	ClusterID string
	NodeID    int32
	// Partitions is the number of coordinator partitions; every node must
	// use the same.
	Partitions int
	// LeaseTTL is the etcd lease TTL (default 10s, whole seconds, at least
	// 2s): how long a dead node keeps its partitions.
	LeaseTTL time.Duration
	// SafetyMargin is how long before its local lease deadline a node stops
	// serving (default LeaseTTL/10): it covers a local clock that runs
	// slower than etcd's by up to SafetyMargin/LeaseTTL. Negative: none.
	SafetyMargin time.Duration
	// Clock is the node's clock (default the wall clock; its monotonic
	// reading is what deadlines use).
	Clock  clock.Clock
	Logger *slog.Logger
}

// Cluster is one node's view of and part in the cluster. It implements
// server.Topology.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	ls     LeaseStore
	fence  Fence
	clk    clock.Clock
	ttl    time.Duration
	margin time.Duration
	base   time.Time // origin of deadline

	self atomic.Pointer[server.Broker]
	// selfAdvert is this node as its registration gives it to clients
	// (readRegistration of what join registers), or nil when its
	// address is unusable: Brokers then leaves it out, as every other
	// node does.
	selfAdvert atomic.Pointer[server.Broker]
	coord      Partitions

	// deadline is the local lease deadline in ns since base; 0 = no lease.
	deadline atomic.Int64
	started  atomic.Bool
	sessions atomic.Int64 // leases granted (Sessions)

	mu sync.Mutex
	// nodes are the registered nodes: the live set, whose ids decide the
	// assignment. A node in hidden is live but not advertised to clients.
	nodes map[int32]server.Broker
	// hidden are the registered nodes whose registration gives no address
	// a client can use (unreadable, an empty or wildcard host, a port
	// outside 1-65535), each with why; regWarned is, per node id, the
	// registration value last warned about (kept across reloads of the
	// registry, so that the warning comes once per value).
	hidden    map[int32]string
	regWarned map[int32]string
	owners    map[int32]Holder // partition -> holder, as etcd says
	ownRev    map[int32]int64  // partition -> etcd revision owners[p] reflects (older events are skipped)
	mine      map[int32]int64  // partitions this node serves -> create revision of its key
	// heldBy is the node that last held each partition's key, as far as
	// this node has seen (kept when the key goes): the log line of a
	// partition this node takes over says where it came from.
	heldBy  map[int32]int32
	lease   LeaseID
	leases  []LeaseID     // earlier sessions' leases to revoke
	changed chan struct{} // closed and replaced on every ownership change

	// idWaitSince is when this node first found its id registered by
	// another process, in the wait going on (zero: none); idWaitLogged is
	// when it last said so. Used by run's goroutine only.
	idWaitSince, idWaitLogged time.Time
	// readFailSince is when the node's reads of the registry and
	// ownership keys began to fail, in a run of failures going on (zero:
	// none); readFails counts them, readFailLogged is when the run was
	// last logged (logReadFailure). Used by the session goroutine only.
	readFailSince, readFailLogged time.Time
	readFails                     int

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// nodeInfo is the value of a node's registration key.
type nodeInfo struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Rack *string `json:"rack,omitempty"`
	// Listeners are the node's advertised endpoints by listener name
	// (absent in registrations of nodes from before listeners: Host and
	// Port then serve every listener).
	Listeners []endpointInfo `json:"listeners,omitempty"`
}

type endpointInfo struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

type noFence struct{}

func (noFence) SetOwner(int32, int64) {}
func (noFence) ClearOwner(int32)      {}

var _ server.Topology = (*Cluster)(nil)

// New returns a cluster member; SetSelf and Start make it join.
func New(cfg Config) (*Cluster, error) {
	if cfg.Leases == nil && (cfg.Client == nil || cfg.Store == nil) {
		return nil, errors.New("cluster: Client and Store (or Leases) are required")
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 50
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.LeaseTTL < 2*time.Second {
		cfg.LeaseTTL = 2 * time.Second
	}
	cfg.LeaseTTL = cfg.LeaseTTL.Round(time.Second)
	if cfg.SafetyMargin == 0 {
		cfg.SafetyMargin = cfg.LeaseTTL / 10
	}
	if cfg.SafetyMargin < 0 {
		cfg.SafetyMargin = 0
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cluster{
		cfg: cfg, log: cfg.Logger, ls: cfg.Leases, fence: cfg.Fence, clk: cfg.Clock, ttl: cfg.LeaseTTL,
		margin: cfg.SafetyMargin, base: cfg.Clock.Now(),
		nodes: map[int32]server.Broker{}, hidden: map[int32]string{}, regWarned: map[int32]string{}, owners: map[int32]Holder{}, ownRev: map[int32]int64{}, mine: map[int32]int64{},
		heldBy:  map[int32]int32{},
		changed: make(chan struct{}), done: make(chan struct{}),
	}
	if c.ls == nil {
		c.ls = &EtcdLeases{Client: cfg.Client, Prefix: cfg.Store.Prefix()}
	}
	if c.fence == nil {
		if cfg.Store != nil {
			c.fence = cfg.Store
		} else {
			c.fence = noFence{}
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.self.Store(&server.Broker{NodeID: cfg.NodeID})
	return c, nil
}

// SetSelf sets the broker this node advertises (before Start).
func (c *Cluster) SetSelf(b server.Broker) {
	b.NodeID = c.cfg.NodeID
	c.self.Store(&b)
	val, _ := json.Marshal(registrationOf(b))
	if adv, hidden, _ := readRegistration(b.NodeID, val); hidden == "" {
		c.selfAdvert.Store(&adv)
	} else {
		c.selfAdvert.Store(nil)
	}
}

// registrationOf is what a node advertising b registers.
func registrationOf(b server.Broker) nodeInfo {
	ni := nodeInfo{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack}
	for _, e := range b.Endpoints {
		ni.Listeners = append(ni.Listeners, endpointInfo{Name: e.Listener, Host: e.Host, Port: e.Port})
	}
	return ni
}

// Start joins the cluster; partitions are acquired and released on p from
// now on, in the background.
func (c *Cluster) Start(p Partitions) {
	c.coord = p
	c.started.Store(true)
	go c.run()
}

func (c *Cluster) now() int64 { return int64(c.clk.Now().Sub(c.base)) }

// deadlineTime is the local lease deadline (zero time: no lease).
func (c *Cluster) deadlineTime() time.Time {
	d := c.deadline.Load()
	if d == 0 {
		return time.Time{}
	}
	return c.base.Add(time.Duration(d))
}

// Serving reports whether this node's lease is still valid by its own clock
// (with the safety margin): false means it must not answer for any
// partition.
func (c *Cluster) Serving() bool {
	return LeaseValid(c.clk.Now(), c.deadlineTime(), c.margin)
}

// Sessions returns how many etcd leases this node has been granted: one
// per session, so every one after the first follows a lost lease.
func (c *Cluster) Sessions() int64 { return c.sessions.Load() }

// Owned reports whether this node currently serves partition p.
func (c *Cluster) Owned(p int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mine[p]
	return ok && c.Serving()
}

// OwnedPartitions returns the partitions this node serves, sorted.
func (c *Cluster) OwnedPartitions() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []int32
	for p := range c.mine {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Owner returns the node holding partition p according to etcd (-1: none).
func (c *Cluster) Owner(p int32) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.owners[p]; ok {
		return o.Node
	}
	return -1
}

// Changed returns a channel closed at the next change of this node's view
// of ownership or membership.
func (c *Cluster) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Cluster) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Cluster) liveLocked() []int32 { return sortedKeys(c.nodes) }

// Settled reports whether, in this node's view, every partition is held by
// its target under the current live set, and this node serves its share.
func (c *Cluster) Settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	target := Assign(c.cfg.Partitions, c.liveLocked())
	for p, t := range target {
		o, ok := c.owners[int32(p)]
		if !ok || o.Node != t {
			return false
		}
		if t == c.cfg.NodeID {
			if _, mine := c.mine[int32(p)]; !mine {
				return false
			}
		}
	}
	return c.Serving()
}

// Awaited returns the partitions targeted at this node under its view of
// the live nodes that it does not serve yet (still held by another node,
// or free and not acquired yet), and whether that view lists this node at
// all (false until its first read of the registry after registering).
func (c *Cluster) Awaited() (ps []int32, listed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nodes[c.cfg.NodeID]; !ok {
		return nil, false
	}
	for p, t := range Assign(c.cfg.Partitions, c.liveLocked()) {
		if t != c.cfg.NodeID {
			continue
		}
		if _, mine := c.mine[int32(p)]; !mine {
			ps = append(ps, int32(p))
		}
	}
	return ps, true
}

// ClusterID implements server.Topology.
func (c *Cluster) ClusterID() string { return c.cfg.ClusterID }

// NodeID implements server.Topology: this node's id.
func (c *Cluster) NodeID() int32 { return c.cfg.NodeID }

// ControllerID implements server.Topology: the lowest live node id. A node
// without a valid lease (cut off from etcd, or not registered yet) names the
// lowest other node it knows of, or -1 if it knows none: never itself, since
// it can change nothing, and a client sent to a node it can reach moves
// there at once, where -1 only has it ask for metadata again.
func (c *Cluster) ControllerID() int32 {
	bs := c.Brokers()
	if !c.Serving() {
		for _, b := range bs {
			if b.NodeID != c.cfg.NodeID {
				return b.NodeID
			}
		}
		return -1
	}
	if len(bs) == 0 {
		return c.cfg.NodeID
	}
	return bs[0].NodeID
}

// Brokers implements server.Topology: the live nodes, by id, but for those
// whose registration gives clients no usable address (Unadvertised).
func (c *Cluster) Brokers() []server.Broker {
	c.mu.Lock()
	bs := make([]server.Broker, 0, len(c.nodes)+1)
	for id, b := range c.nodes {
		if _, hidden := c.hidden[id]; !hidden {
			bs = append(bs, b)
		}
	}
	c.mu.Unlock()
	if !slices.ContainsFunc(bs, func(b server.Broker) bool { return b.NodeID == c.cfg.NodeID }) {
		// Not registered (yet), or its registration unusable as
		// others read it (written over by hand): still list itself,
		// unless its own address is one no client can use.
		if self := c.selfAdvert.Load(); self != nil {
			bs = append(bs, *self)
		}
	}
	slices.SortFunc(bs, func(a, b server.Broker) int { return int(a.NodeID) - int(b.NodeID) })
	return bs
}

// NodeCount returns the number of live nodes, this one included: the
// registered ones, advertised or not, and this node if it is not registered.
func (c *Cluster) NodeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.nodes)
	if _, ok := c.nodes[c.cfg.NodeID]; !ok {
		n++
	}
	return n
}

// Unadvertised returns the live nodes left out of Brokers because their
// registration gives no address a client can use, each with why (as the
// node's warning says it).
func (c *Cluster) Unadvertised() map[int32]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.hidden)
}

// Coordinator implements server.Topology: the node holding the group's
// partition, or COORDINATOR_NOT_AVAILABLE (15) while nobody does, or while
// the node holding it has a registration that gives clients no usable
// address (they would dial nowhere; 15 is retriable). A node
// without a valid lease answers 15 for every group: its view of the owners
// is no longer followed (it may name itself, or a node that has gone), and
// 15 is retriable, so clients ask another node.
func (c *Cluster) Coordinator(groupID string) (server.Broker, int16) {
	if !c.Serving() {
		return server.Broker{}, 15
	}
	p := coordinator.PartitionFor(groupID, c.cfg.Partitions)
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owners[p]
	if !ok {
		return server.Broker{}, 15
	}
	b, ok := c.nodes[o.Node]
	if _, hidden := c.hidden[o.Node]; !ok || hidden {
		return server.Broker{}, 15
	}
	return b, 0
}

// sleep waits d on the node's clock (false: the cluster is closing).
func (c *Cluster) sleep(ctx context.Context, d time.Duration) bool {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// run keeps a session alive, starting a new one whenever one ends.
func (c *Cluster) run() {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	for c.ctx.Err() == nil {
		err := c.session()
		if c.ctx.Err() != nil {
			c.releaseAll("closing") // the session ended because the node closes
			return
		}
		c.releaseAll("session ended")
		if errors.Is(err, errNodeIDTaken) {
			// No session began: another process holds the id.
			c.logIDWait()
		} else {
			c.logSessionEnded(err, backoff)
		}
		c.revokeOld()
		if !c.sleep(c.ctx, backoff) {
			return
		}
		if backoff *= 2; backoff > 2*time.Second {
			backoff = 2 * time.Second
		}
	}
}

// idWaitLogEvery is how often a node that cannot register its id says
// again that it is still waiting (it tries every 2 s).
const idWaitLogEvery = time.Minute

// errNodeIDTaken is join's error when another process holds this node's id.
var errNodeIDTaken = errors.New("registered by another live process (or a previous run's lease has not expired yet)")

// logIDWait says that this node waits for its id to be free: at the first
// attempt that finds it taken, then at most once per idWaitLogEvery.
func (c *Cluster) logIDWait() {
	now := c.clk.Now()
	if c.idWaitSince.IsZero() {
		c.idWaitSince = now
	} else if now.Sub(c.idWaitLogged) < idWaitLogEvery {
		return
	}
	c.idWaitLogged = now
	attrs := []any{"node_id", c.cfg.NodeID}
	if waited := now.Sub(c.idWaitSince); waited > 0 {
		attrs = append(attrs, "waited", waited.Round(time.Second))
	}
	c.log.Warn(fmt.Sprintf("cluster: waiting for node id %d to be free: %v", c.cfg.NodeID, errNodeIDTaken), attrs...)
}

// logSessionEnded reports a session that ended, or could not begin
// (errNoSession), for another reason than a taken id.
func (c *Cluster) logSessionEnded(err error, backoff time.Duration) {
	attrs := []any{"node_id", c.cfg.NodeID, "err", err, "backoff", backoff}
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		attrs = append(attrs, "hint", "etcd refuses this node's user or password (changed in etcd?): restart the node with the current one")
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		attrs = append(attrs, "hint", "this node's etcd user lost read-write permission on its prefix")
	case NoUserHint(err) != "":
		attrs = append(attrs, "hint", NoUserHint(err))
	}
	if errors.Is(err, errNoSession) {
		c.log.Warn("cluster: could not begin a session; retrying", attrs...)
		return
	}
	c.log.Warn("cluster: session ended; rejoining", attrs...)
}

// errNoSession marks a session that could not begin: etcd granted no lease,
// so there was no session to end.
var errNoSession = errors.New("no lease granted")

func (c *Cluster) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 3*time.Second)
}

var errLeaseExpired = errors.New("cluster: lease expired (local deadline passed)")

// session runs one lease: register, watch, reconcile, until the lease is
// lost (locally presumed or reported by etcd) or Close.
func (c *Cluster) session() error {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	if err := c.join(ctx); err != nil {
		return err
	}
	lost := make(chan error, 1)
	go c.keepAlive(ctx, lost)
	for ctx.Err() == nil {
		err := c.watchLoop(ctx, lost)
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// join starts a session: a new lease (the local deadline starts at the time
// the grant was sent), then this node's registration on it.
func (c *Cluster) join(ctx context.Context) error {
	t0 := c.now()
	tctx, tcancel := c.timeout(ctx)
	id, ttl, err := c.ls.Grant(tctx, c.ttl)
	tcancel()
	if err != nil {
		return fmt.Errorf("%w: grant: %w", errNoSession, err)
	}
	c.sessions.Add(1)
	c.mu.Lock()
	c.lease = id
	c.leases = append(c.leases, id)
	c.mu.Unlock()
	c.deadline.Store(t0 + int64(ttl))

	val, _ := json.Marshal(registrationOf(*c.self.Load()))
	tctx, tcancel = c.timeout(ctx)
	ok, err := c.ls.Register(tctx, c.cfg.NodeID, val, id)
	tcancel()
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if !ok {
		// Read the registry all the same: until this node may register,
		// Metadata names the live nodes (the other process with this id
		// at its own address) rather than this node alone.
		if _, lerr := c.load(ctx); lerr != nil {
			c.log.Debug("cluster: reading the registry", "err", lerr)
		}
		return fmt.Errorf("register: node id %d is %w", c.cfg.NodeID, errNodeIDTaken)
	}
	if !c.idWaitSince.IsZero() {
		c.log.Info("cluster: node id registered after waiting for it to be free", "node_id", c.cfg.NodeID,
			"waited", c.clk.Now().Sub(c.idWaitSince).Round(time.Second))
		c.idWaitSince, c.idWaitLogged = time.Time{}, time.Time{}
	}
	return nil
}

// keepAlive renews the lease every TTL/3 until the session ends.
func (c *Cluster) keepAlive(ctx context.Context, lost chan<- error) {
	every := c.ttl / 3
	for c.sleep(ctx, every) {
		kctx, cancel := context.WithTimeout(ctx, every)
		err := c.renew(kctx)
		cancel()
		if errors.Is(err, ErrLeaseNotFound) {
			lost <- fmt.Errorf("keepalive: %w", err)
			return
		}
		if err != nil {
			attrs := []any{"err", err}
			if h := NoUserHint(err); h != "" {
				attrs = append(attrs, "hint", h)
			}
			c.log.Debug("cluster: keepalive failed", attrs...)
		}
	}
}

// renew sends one keepalive and, if etcd answers, moves the local deadline
// to (time the request was sent + TTL).
func (c *Cluster) renew(ctx context.Context) error {
	c.mu.Lock()
	id := c.lease
	c.mu.Unlock()
	if id == 0 {
		return ErrLeaseNotFound
	}
	sent := c.now()
	ttl, err := c.ls.KeepAlive(ctx, id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease != id {
		// The session ended while the answer was on its way (releaseAll
		// cleared the deadline): it must not make the node serve again.
		return nil
	}
	if d := sent + int64(ttl); d > c.deadline.Load() {
		c.deadline.Store(d)
	}
	return nil
}

// readFailWarnAfter is how long the reads of the registry and ownership
// keys must have kept failing, while the node's lease holds, before the node
// says so at warn level; readFailLogEvery bounds how often it says so again.
const (
	readFailWarnAfter = 5 * time.Second
	readFailLogEvery  = time.Minute
)

// logReadFailure notes a failed read of the registry and ownership keys. A
// node whose lease holds (its keepalives need no permission on keys) but
// whose reads keep failing — its etcd user lost read permission on the
// prefix, or reads time out — retries every watchRetryPause without end and
// follows no other node's changes: once that has lasted readFailWarnAfter it
// says so at warn level, then at most once per readFailLogEvery, with the
// count and how long (a single failure, as in an etcd leader election, stays
// at debug level).
func (c *Cluster) logReadFailure(err error) {
	now := c.clk.Now()
	if c.readFailSince.IsZero() {
		c.readFailSince = now
	}
	c.readFails++
	if now.Sub(c.readFailSince) < readFailWarnAfter || !c.readFailLogged.IsZero() && now.Sub(c.readFailLogged) < readFailLogEvery {
		c.log.Debug("cluster: reading state", "err", err)
		return
	}
	c.readFailLogged = now
	attrs := []any{"node_id", c.cfg.NodeID, "err", err, "failures", c.readFails, "failing_for", now.Sub(c.readFailSince).Round(time.Second)}
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		attrs = append(attrs, "hint", "this node's etcd user lost read permission on its prefix")
	} else if h := NoUserHint(err); h != "" {
		attrs = append(attrs, "hint", h)
	}
	c.log.Warn("cluster: reading the nodes and partition owners keeps failing; the node serves what it holds and follows no other node's changes", attrs...)
}

// logReadRecovered ends a run of failed reads, saying so if it was logged.
func (c *Cluster) logReadRecovered() {
	if c.readFailSince.IsZero() {
		return
	}
	if !c.readFailLogged.IsZero() {
		c.log.Info("cluster: reading the nodes and partition owners again", "node_id", c.cfg.NodeID,
			"failures", c.readFails, "failed_for", c.clk.Now().Sub(c.readFailSince).Round(time.Second))
	}
	c.readFailSince, c.readFailLogged, c.readFails = time.Time{}, time.Time{}, 0
}

// watchRetryPause is how long watchLoop waits before reading the state
// again after a failed read, or after a watch that ended before delivering
// anything.
const watchRetryPause = 200 * time.Millisecond

// watchLoop reads the registry and ownership keys, then follows their
// changes and reconciles, until an error that needs a fresh read (nil
// return) or the end of the session (error).
func (c *Cluster) watchLoop(ctx context.Context, lost <-chan error) error {
	rev, err := c.load(ctx)
	if err != nil {
		if !c.Serving() {
			return errLeaseExpired
		}
		c.logReadFailure(err)
		select {
		case err := <-lost:
			return err
		default:
		}
		c.sleep(ctx, watchRetryPause)
		return nil
	}
	c.logReadRecovered()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := c.ls.Watch(wctx, rev+1)
	tick := c.clk.NewTimer(250 * time.Millisecond)
	defer tick.Stop()
	if c.reconcile(ctx) {
		return errLeaseExpired
	}
	delivered := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-lost:
			return err
		case <-tick.C():
			tick.Reset(250 * time.Millisecond)
		case b, ok := <-wch:
			if !ok || b.Err != nil {
				if !delivered {
					// A watch that ends before it delivered anything may
					// end so again at once (etcd refusing it while
					// granting the reads): pause as after a failed read,
					// not re-read and re-watch in a tight loop.
					c.log.Debug("cluster: watch ended before delivering", "err", b.Err)
					c.sleep(ctx, watchRetryPause)
				}
				return nil // re-read and re-watch
			}
			delivered = true
			c.apply(b)
		}
		if c.reconcile(ctx) {
			return errLeaseExpired
		}
	}
}

// load replaces the view with the store's registry and ownership keys;
// it returns their revision.
func (c *Cluster) load(ctx context.Context) (int64, error) {
	tctx, tcancel := c.timeout(ctx)
	s, err := c.ls.Load(tctx)
	tcancel()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.nodes = map[int32]server.Broker{}
	c.hidden = map[int32]string{}
	c.owners = map[int32]Holder{}
	c.ownRev = map[int32]int64{}
	c.applyLocked(WatchBatch{Nodes: s.Nodes, Owners: s.Owners})
	for id := range c.regWarned {
		if _, ok := c.nodes[id]; !ok {
			delete(c.regWarned, id) // gone while the registry was not watched
		}
	}
	c.mu.Unlock()
	return s.Rev, nil
}

// apply updates the view with watched changes.
func (c *Cluster) apply(b WatchBatch) {
	c.mu.Lock()
	c.applyLocked(b)
	c.mu.Unlock()
}

func (c *Cluster) applyLocked(b WatchBatch) {
	for _, n := range b.Nodes {
		c.applyNodeLocked(n)
	}
	for _, o := range b.Owners {
		c.applyOwnerLocked(o)
	}
	c.notifyLocked()
}

func (c *Cluster) applyNodeLocked(n NodeKV) {
	if n.Deleted {
		delete(c.nodes, n.ID)
		delete(c.hidden, n.ID)
		delete(c.regWarned, n.ID)
		return
	}
	// The node is live whatever its value says: its key exists on its
	// lease. Leaving it out of the live set would move its partitions
	// away from a node that serves them.
	b, hidden, problems := readRegistration(n.ID, n.Info)
	c.nodes[n.ID] = b
	if hidden != "" {
		c.hidden[n.ID] = hidden
	} else {
		delete(c.hidden, n.ID)
	}
	c.noteRegistrationLocked(n.ID, string(n.Info), hidden, problems)
}

// readRegistration reads a node's registration value into the broker given
// to clients. Endpoints with no usable address are left out (problems says
// which): clients of their listener are then not sent to the node, as for
// a node without that listener. hidden, if not empty, says why the node
// cannot be given to any client: its value is unreadable, its own address
// is unusable, or none of the endpoints it lists is usable.
func readRegistration(id int32, info []byte) (b server.Broker, hidden string, problems []string) {
	b = server.Broker{NodeID: id}
	var ni nodeInfo
	if err := json.Unmarshal(info, &ni); err != nil {
		// encoding/json quotes a number it cannot fit whole: cut.
		return b, fmt.Sprintf("its registration is not readable JSON (%s)", sasl.LogText(err.Error())), nil
	}
	b.Host, b.Port, b.Rack = ni.Host, ni.Port, ni.Rack
	if why := unusableAddr(ni.Host, ni.Port); why != "" {
		hidden = "its address " + why
	}
	if ni.Rack != nil && len(*ni.Rack) > maxKafkaString {
		// Advertised, it would be cut at every answer that carries it.
		b.Rack = nil
		problems = append(problems, fmt.Sprintf("its rack is %d bytes long, more than a Kafka string holds (%d): not advertised",
			len(*ni.Rack), maxKafkaString))
	}
	bad := 0
	for _, e := range ni.Listeners {
		if why := unusableAddr(e.Host, e.Port); why != "" {
			if bad++; bad <= maxEndpointProblems {
				problems = append(problems, fmt.Sprintf("its endpoint on listener %s %s", quoteNote(e.Name), why))
			}
			continue
		}
		b.Endpoints = append(b.Endpoints, server.Endpoint{Listener: e.Name, Host: e.Host, Port: e.Port})
	}
	if bad > maxEndpointProblems {
		problems = append(problems, fmt.Sprintf("and %d more unusable endpoints", bad-maxEndpointProblems))
	}
	if hidden == "" && len(ni.Listeners) > 0 && len(b.Endpoints) == 0 {
		hidden = "none of its listener endpoints is usable"
	}
	return b, hidden, problems
}

// unusableAddr says why a registered host and port are no address a client
// can connect to ("": they are): the same hosts a node refuses to advertise
// at start (empty, or a wildcard address), and ports outside 1-65535.
func unusableAddr(host string, port int32) string {
	var why []string
	if ip := net.ParseIP(host); strings.TrimSpace(host) == "" || ip != nil && ip.IsUnspecified() {
		why = append(why, fmt.Sprintf("has host %s, which no client can connect to", quoteNote(host)))
	} else if len(host) > maxKafkaString {
		// Answers would carry it cut to the protocol's limit: a host
		// that is no longer this one.
		why = append(why, fmt.Sprintf("has a host of %d bytes, more than a Kafka string holds (%d)", len(host), maxKafkaString))
	}
	if port < 1 || port > 65535 {
		why = append(why, fmt.Sprintf("has port %d, outside 1-65535", port))
	}
	return strings.Join(why, " and ")
}

// What readRegistration says about a value is bounded whatever the value
// holds (an etcd value can be a megabyte and a half): it goes into a log
// line and the console's cluster page. It names at most
// maxEndpointProblems unusable endpoints and counts the others, quotes a
// name or host only up to maxNoteQuote bytes, and cuts a decoding error
// as a log line's text (sasl.LogText).
const (
	maxEndpointProblems = 5
	maxNoteQuote        = 64
)

// maxKafkaString is the most bytes a string of Kafka's protocol holds: a
// registration's host or rack longer than that is not advertised (the
// server would cut it in every answer carrying it, and log each cut).
const maxKafkaString = 0x7fff

// quoteNote is s quoted, or its length when it is longer than
// maxNoteQuote bytes.
func quoteNote(s string) string {
	if len(s) > maxNoteQuote {
		return fmt.Sprintf("(%d bytes)", len(s))
	}
	return fmt.Sprintf("%q", s)
}

// noteRegistrationLocked logs a registration that cannot be given to
// clients in full, once per value (the registry is read again after every
// watch that ends, and the value is the same), and the return of a usable
// one.
func (c *Cluster) noteRegistrationLocked(id int32, val, hidden string, problems []string) {
	if hidden == "" && len(problems) == 0 {
		if _, warned := c.regWarned[id]; warned {
			delete(c.regWarned, id)
			c.log.Info(fmt.Sprintf("cluster: node %d's registration gives usable addresses again; clients are sent to it", id),
				"node_id", id)
		}
		return
	}
	if prev, warned := c.regWarned[id]; warned && prev == val {
		return
	}
	c.regWarned[id] = val
	const source = "cohort nodes refuse such addresses at start: the registration was written by another build or by hand; " +
		"restart that node with a usable --advertise or --advertised-listeners"
	if hidden != "" {
		why := append([]string{hidden}, problems...)
		c.log.Warn(fmt.Sprintf("cluster: node %d is live but left out of Metadata: %s; FindCoordinator answers "+
			"COORDINATOR_NOT_AVAILABLE for the groups it coordinates, and its partitions stay with it", id, strings.Join(why, "; ")),
			"node_id", id, "hint", source)
		return
	}
	c.log.Warn(fmt.Sprintf("cluster: node %d is left out of Metadata for the clients of some listeners: %s; FindCoordinator "+
		"answers them COORDINATOR_NOT_AVAILABLE for the groups it coordinates", id, strings.Join(problems, "; ")),
		"node_id", id, "hint", source)
}

func (c *Cluster) applyOwnerLocked(o OwnerKV) {
	if o.P < 0 || int(o.P) >= c.cfg.Partitions {
		return
	}
	// Our own acquisitions and hand-overs update the view before their
	// watch events arrive; skip events older than what we know.
	if o.ModRev <= c.ownRev[o.P] {
		return
	}
	c.ownRev[o.P] = o.ModRev
	if o.Deleted {
		delete(c.owners, o.P)
		return
	}
	c.owners[o.P] = o.Holder
	c.heldBy[o.P] = o.Holder.Node
}

// View returns what this node decides from, at its clock's now.
func (c *Cluster) View() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	return View{
		Self: c.cfg.NodeID, Partitions: c.cfg.Partitions, Nodes: c.liveLocked(),
		Owners: maps.Clone(c.owners), Mine: maps.Clone(c.mine), Lease: c.lease,
		Now: c.clk.Now(), Deadline: c.deadlineTime(), Margin: c.margin,
	}
}

// reconcile decides (Decide) and carries the actions out; it reports true
// when the lease is no longer valid (the session must end). Each store
// call is bounded; failures are retried on the next round.
func (c *Cluster) reconcile(ctx context.Context) (expired bool) {
	v := c.View()
	a := Decide(v)
	if a.Expired {
		return true
	}
	if len(a.Lost) > 0 {
		now := map[int32]string{}
		for _, p := range a.Lost {
			c.drop(p)
			now[p] = "no node"
			if o, ok := v.Owners[p]; ok {
				now[p] = fmt.Sprintf("node %d", o.Node)
			}
		}
		c.log.Warn("cluster: lost ownership", "partitions", len(a.Lost), "partition_ids", idRanges(a.Lost),
			"held_by", byLabel(now))
	}
	var from map[int32]string // partitions taken over in this round -> where from
	for _, p := range a.Adopt {
		rev := v.Owners[p].CreateRev
		c.mu.Lock()
		c.mine[p] = rev
		c.notifyLocked()
		c.mu.Unlock()
		c.fence.SetOwner(p, rev)
		c.coord.Acquire(p)
		if from == nil {
			from = map[int32]string{}
		}
		from[p] = "this node's own key, whose acquisition answer was lost"
	}
	for _, p := range a.Stray {
		c.handOver(ctx, p, v.Owners[p].CreateRev)
	}
	if len(a.Release) > 0 {
		target := Assign(v.Partitions, v.Nodes)
		to := map[int32]string{}
		for _, p := range a.Release {
			c.handOver(ctx, p, c.drop(p))
			to[p] = "no node: this node is not in the registry"
			if int(p) < len(target) && slices.Contains(v.Nodes, v.Self) {
				to[p] = fmt.Sprintf("node %d", target[p])
			}
		}
		c.log.Info("cluster: handed partitions over", "partitions", len(a.Release), "partition_ids", idRanges(a.Release),
			"to", byLabel(to), "nodes", idList(v.Nodes))
	}
	if len(a.Acquire) > 0 {
		for p, f := range c.acquire(ctx, a.Acquire, v.Lease, v.Nodes) {
			if from == nil {
				from = map[int32]string{}
			}
			from[p] = f
		}
	}
	if len(from) > 0 {
		ps := slices.Sorted(maps.Keys(from))
		c.log.Info("cluster: serving partitions", "partitions", len(ps), "partition_ids", idRanges(ps),
			"from", byLabel(from), "nodes", idList(v.Nodes))
	}
	return false
}

// idRanges writes sorted partition ids as ranges: "0-3,7,9-10".
func idRanges(ps []int32) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ps[i])))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(ps[j])))
		}
		i = j + 1
	}
	return b.String()
}

// idList writes node ids: "1,2,4".
func idList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// byLabel says what labels partitions have: the label alone when they all
// share it, else each label with its partitions ("node 2 (0-3); node 4
// (7)").
func byLabel(m map[int32]string) string {
	groups := map[string][]int32{}
	for p, l := range m {
		groups[l] = append(groups[l], p)
	}
	if len(groups) == 1 {
		for l := range groups {
			return l
		}
	}
	labels := slices.Sorted(maps.Keys(groups))
	parts := make([]string, len(labels))
	for i, l := range labels {
		ps := groups[l]
		slices.Sort(ps)
		parts[i] = l + " (" + idRanges(ps) + ")"
	}
	return strings.Join(parts, "; ")
}

// handOver deletes p's ownership key if it is still the one created at rev,
// so that p's next owner can take it at once.
func (c *Cluster) handOver(ctx context.Context, p int32, rev int64) {
	tctx, cancel := c.timeout(ctx)
	drev, ok, err := c.ls.Release(tctx, p, rev)
	cancel()
	if err != nil {
		c.log.Warn("cluster: handing over partition (its key stays until the lease ends)", "partition", p, "err", err)
		return
	}
	if ok {
		c.mu.Lock()
		if drev > c.ownRev[p] {
			delete(c.owners, p)
			c.ownRev[p] = drev
			c.notifyLocked()
		}
		c.mu.Unlock()
	}
}

// drop stops serving p at once and forgets it; returns its key's revision.
func (c *Cluster) drop(p int32) int64 {
	c.mu.Lock()
	rev := c.mine[p]
	delete(c.mine, p)
	c.notifyLocked()
	c.mu.Unlock()
	c.fence.ClearOwner(p)
	c.coord.Release(p)
	return rev
}

// acquire takes free partitions: one transaction per partition (so that
// one taken meanwhile by another node does not fail the others). It returns
// the partitions taken, each with where it came from, for the log: the node
// that held its key last, as this node saw it, among live (the registered
// nodes).
func (c *Cluster) acquire(ctx context.Context, ps []int32, lease LeaseID, live []int32) map[int32]string {
	var taken map[int32]string
	for _, p := range ps {
		if ctx.Err() != nil || !c.Serving() {
			break
		}
		tctx, cancel := c.timeout(ctx)
		rev, ok, err := c.ls.Acquire(tctx, p, c.cfg.NodeID, lease)
		cancel()
		if err != nil {
			c.log.Debug("cluster: acquiring", "partition", p, "err", err)
			break
		}
		if !ok {
			continue
		}
		c.mu.Lock()
		prev, seen := c.heldBy[p]
		c.mine[p] = rev
		if rev > c.ownRev[p] {
			c.owners[p] = Holder{Node: c.cfg.NodeID, CreateRev: rev, Lease: lease}
			c.ownRev[p] = rev
			c.heldBy[p] = c.cfg.NodeID
		}
		c.notifyLocked()
		c.mu.Unlock()
		c.fence.SetOwner(p, rev)
		c.coord.Acquire(p)
		c.log.Debug("cluster: acquired", "partition", p, "rev", rev)
		if taken == nil {
			taken = map[int32]string{}
		}
		switch {
		case !seen:
			taken[p] = "no node held it"
		case prev == c.cfg.NodeID:
			taken[p] = "this node's earlier session"
		case slices.Contains(live, prev):
			taken[p] = fmt.Sprintf("handed over by node %d", prev)
		default:
			taken[p] = fmt.Sprintf("node %d left the cluster", prev)
		}
	}
	return taken
}

// releaseAll stops serving everything and ends the session's lease locally
// (lease lost or closing).
func (c *Cluster) releaseAll(why string) {
	ps := c.OwnedPartitions()
	for _, p := range ps {
		c.drop(p)
	}
	c.mu.Lock()
	c.lease = 0
	c.deadline.Store(0) // with the lease: renew moves the deadline only of the current lease
	c.mu.Unlock()
	if len(ps) > 0 {
		level := slog.LevelWarn // a lost lease: other nodes take over
		if why == "closing" {
			level = slog.LevelInfo // a node stopping hands its partitions over
		}
		c.log.Log(context.Background(), level, "cluster: stopped serving all partitions", "why", why, "partitions", len(ps),
			"partition_ids", idRanges(ps))
	}
}

// revokeOld revokes the leases of ended sessions (best effort, bounded):
// their keys, if etcd still has them, then go at once instead of at expiry.
func (c *Cluster) revokeOld() {
	c.mu.Lock()
	old := c.leases
	c.leases = nil
	c.mu.Unlock()
	var keep []LeaseID
	for _, id := range old {
		ctx, cancel := context.WithTimeout(c.ctx, time.Second)
		err := c.ls.Revoke(ctx, id)
		cancel()
		if err != nil && !errors.Is(err, ErrLeaseNotFound) {
			keep = append(keep, id)
		}
	}
	c.mu.Lock()
	c.leases = append(keep, c.leases...)
	c.mu.Unlock()
}

// Close leaves the cluster: stops serving every partition, then revokes the
// lease so the other nodes take over at once.
func (c *Cluster) Close() error {
	c.cancel()
	if !c.started.Load() {
		return nil
	}
	<-c.done
	c.leave()
	return nil
}

// leave stops serving every partition and revokes every lease (bounded).
func (c *Cluster) leave() {
	c.releaseAll("closing")
	c.mu.Lock()
	leases := c.leases
	c.leases = nil
	c.mu.Unlock()
	for _, id := range leases {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		// Not found: gone already (expired during an outage), as
		// revokeOld takes it.
		if err := c.ls.Revoke(ctx, id); err != nil && !errors.Is(err, ErrLeaseNotFound) {
			c.log.Warn("cluster: lease not revoked on leaving; other nodes take this node's partitions when it expires", "err", err)
		}
		cancel()
	}
}
