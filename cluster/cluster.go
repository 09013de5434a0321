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
// then starts a new session (new lease) and rejoins.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/server"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
)

// Partitions is what the cluster moves: the coordinator.
type Partitions interface {
	Acquire(p int32)
	Release(p int32)
}

// Config configures a Cluster.
type Config struct {
	Client *clientv3.Client
	// Store is the fenced etcd store the coordinator writes to; the
	// cluster tells it which partitions this node owns.
	Store     *etcdstore.Store
	ClusterID string
	NodeID    int32
	// Partitions is the number of coordinator partitions; every node must
	// use the same.
	Partitions int
	// LeaseTTL is the etcd lease TTL (default 10s, whole seconds, at least
	// 2s): how long a dead node keeps its partitions.
	LeaseTTL time.Duration
	Logger   *slog.Logger
}

// Cluster is one node's view of and part in the cluster. It implements
// server.Topology.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	prefix string
	ttl    time.Duration
	base   time.Time // monotonic origin of deadline

	self  atomic.Pointer[server.Broker]
	coord Partitions

	// deadline is the local lease deadline in ns since base; 0 = no lease.
	deadline atomic.Int64
	// paused (tests): keepalives stop and the local clock seems frozen.
	started  atomic.Bool
	sessions atomic.Int64 // leases granted (Sessions)
	paused   atomic.Bool
	pausedAt atomic.Int64

	mu      sync.Mutex
	nodes   map[int32]server.Broker
	owners  map[int32]owner // partition -> holder, as etcd says
	ownRev  map[int32]int64 // partition -> etcd revision owners[p] reflects (older events are skipped)
	mine    map[int32]int64 // partitions this node serves -> create revision of its key
	lease   clientv3.LeaseID
	leases  []clientv3.LeaseID // earlier sessions' leases to revoke
	changed chan struct{}      // closed and replaced on every ownership change

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{}
}

type owner struct {
	node      int32
	createRev int64
	lease     clientv3.LeaseID
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

var _ server.Topology = (*Cluster)(nil)

// New returns a cluster member; SetSelf and Start make it join.
func New(cfg Config) (*Cluster, error) {
	if cfg.Client == nil || cfg.Store == nil {
		return nil, errors.New("cluster: Client and Store are required")
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Cluster{
		cfg: cfg, log: cfg.Logger, prefix: cfg.Store.Prefix(), ttl: cfg.LeaseTTL, base: time.Now(),
		nodes: map[int32]server.Broker{}, owners: map[int32]owner{}, ownRev: map[int32]int64{}, mine: map[int32]int64{},
		changed: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.self.Store(&server.Broker{NodeID: cfg.NodeID})
	return c, nil
}

// SetSelf sets the broker this node advertises (before Start).
func (c *Cluster) SetSelf(b server.Broker) {
	b.NodeID = c.cfg.NodeID
	c.self.Store(&b)
}

// Start joins the cluster; partitions are acquired and released on p from
// now on, in the background.
func (c *Cluster) Start(p Partitions) {
	c.coord = p
	c.started.Store(true)
	go c.run()
}

func (c *Cluster) now() int64 {
	if c.paused.Load() {
		return c.pausedAt.Load()
	}
	return int64(time.Since(c.base))
}

// Serving reports whether this node's lease is still valid by its own clock:
// false means it must not answer for any partition.
func (c *Cluster) Serving() bool {
	d := c.deadline.Load()
	return d != 0 && c.now() < d
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
		return o.node
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

// Settled reports whether, in this node's view, every partition is held by
// its target under the current live set, and this node serves its share.
func (c *Cluster) Settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int32, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	target := Assign(c.cfg.Partitions, ids)
	for p, t := range target {
		o, ok := c.owners[int32(p)]
		if !ok || o.node != t {
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

// ClusterID implements server.Topology.
func (c *Cluster) ClusterID() string { return c.cfg.ClusterID }

// ControllerID implements server.Topology: the lowest live node id.
func (c *Cluster) ControllerID() int32 {
	bs := c.Brokers()
	if len(bs) == 0 {
		return c.cfg.NodeID
	}
	return bs[0].NodeID
}

// Brokers implements server.Topology: the live nodes, by id.
func (c *Cluster) Brokers() []server.Broker {
	c.mu.Lock()
	bs := make([]server.Broker, 0, len(c.nodes)+1)
	for _, b := range c.nodes {
		bs = append(bs, b)
	}
	c.mu.Unlock()
	if !slices.ContainsFunc(bs, func(b server.Broker) bool { return b.NodeID == c.cfg.NodeID }) {
		bs = append(bs, *c.self.Load()) // not registered (yet): still list itself
	}
	slices.SortFunc(bs, func(a, b server.Broker) int { return int(a.NodeID) - int(b.NodeID) })
	return bs
}

// Coordinator implements server.Topology: the node holding the group's
// partition, or COORDINATOR_NOT_AVAILABLE (15) while nobody does.
func (c *Cluster) Coordinator(groupID string) (server.Broker, int16) {
	p := coordinator.PartitionFor(groupID, c.cfg.Partitions)
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.owners[p]
	if !ok {
		return server.Broker{}, 15
	}
	b, ok := c.nodes[o.node]
	if !ok {
		return server.Broker{}, 15
	}
	return b, 0
}

func (c *Cluster) nodeKey(id int32) string { return c.prefix + "nodes/" + strconv.Itoa(int(id)) }
func (c *Cluster) ownKey(p int32) string   { return etcdstore.OwnerKey(c.prefix, p) }

// run keeps a session alive, starting a new one whenever one ends.
func (c *Cluster) run() {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	for c.ctx.Err() == nil {
		err := c.session()
		c.releaseAll("session ended")
		if c.ctx.Err() != nil {
			return
		}
		c.log.Warn("cluster: session ended; rejoining", "node_id", c.cfg.NodeID, "err", err, "backoff", backoff)
		c.revokeOld()
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > 2*time.Second {
			backoff = 2 * time.Second
		}
	}
}

func (c *Cluster) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, 3*time.Second)
}

var errLeaseExpired = errors.New("cluster: lease expired (local deadline passed)")

// session runs one lease: register, watch, reconcile, until the lease is
// lost (locally presumed or reported by etcd) or Close.
func (c *Cluster) session() error {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	t0 := c.now()
	tctx, tcancel := c.timeout()
	lg, err := c.cfg.Client.Grant(tctx, int64(c.ttl/time.Second))
	tcancel()
	if err != nil {
		return fmt.Errorf("grant: %w", err)
	}
	c.sessions.Add(1)
	c.mu.Lock()
	c.lease = lg.ID
	c.leases = append(c.leases, lg.ID)
	c.mu.Unlock()
	c.deadline.Store(t0 + int64(lg.TTL)*int64(time.Second))

	self := *c.self.Load()
	ni := nodeInfo{ID: self.NodeID, Host: self.Host, Port: self.Port, Rack: self.Rack}
	for _, e := range self.Endpoints {
		ni.Listeners = append(ni.Listeners, endpointInfo{Name: e.Listener, Host: e.Host, Port: e.Port})
	}
	val, _ := json.Marshal(ni)
	key := c.nodeKey(c.cfg.NodeID)
	tctx, tcancel = c.timeout()
	resp, err := c.cfg.Client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lg.ID))).Commit()
	tcancel()
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("register: node id %d is registered by another live process (or a previous run's lease has not expired yet)", c.cfg.NodeID)
	}

	lost := make(chan error, 1)
	go c.keepAlive(ctx, lg.ID, lost)

	for ctx.Err() == nil {
		err := c.watchLoop(ctx, lost)
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// keepAlive renews the lease every TTL/3 and moves the local deadline to
// (time the request was sent + TTL) on each success.
func (c *Cluster) keepAlive(ctx context.Context, id clientv3.LeaseID, lost chan<- error) {
	every := c.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.paused.Load() {
			continue
		}
		sent := c.now()
		kctx, cancel := context.WithTimeout(ctx, every)
		r, err := c.cfg.Client.KeepAliveOnce(kctx, id)
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			lost <- fmt.Errorf("keepalive: %w", err)
			return
		}
		if err != nil {
			c.log.Debug("cluster: keepalive failed", "err", err)
			continue
		}
		if c.paused.Load() {
			continue
		}
		if d := sent + r.TTL*int64(time.Second); d > c.deadline.Load() {
			c.deadline.Store(d)
		}
	}
}

// watchLoop reads the registry and ownership keys, then follows their
// changes and reconciles, until an error that needs a fresh read (nil
// return) or the end of the session (error).
func (c *Cluster) watchLoop(ctx context.Context, lost <-chan error) error {
	tctx, tcancel := c.timeout()
	nresp, err := c.cfg.Client.Get(tctx, c.prefix+"nodes/", clientv3.WithPrefix())
	var oresp *clientv3.GetResponse
	if err == nil {
		oresp, err = c.cfg.Client.Get(tctx, etcdstore.OwnerPrefix(c.prefix), clientv3.WithPrefix(), clientv3.WithRev(nresp.Header.Revision))
	}
	tcancel()
	if err != nil {
		if !c.Serving() {
			return errLeaseExpired
		}
		c.log.Debug("cluster: reading state", "err", err)
		select {
		case <-ctx.Done():
		case err := <-lost:
			return err
		case <-time.After(200 * time.Millisecond):
		}
		return nil
	}
	c.mu.Lock()
	c.nodes = map[int32]server.Broker{}
	c.owners = map[int32]owner{}
	c.ownRev = map[int32]int64{}
	for _, kv := range nresp.Kvs {
		c.applyNode(kv, false)
	}
	for _, kv := range oresp.Kvs {
		c.applyOwner(kv, false)
	}
	c.notifyLocked()
	c.mu.Unlock()
	rev := nresp.Header.Revision + 1
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wn := c.cfg.Client.Watch(wctx, c.prefix+"nodes/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	wo := c.cfg.Client.Watch(wctx, etcdstore.OwnerPrefix(c.prefix), clientv3.WithPrefix(), clientv3.WithRev(rev))
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	c.reconcile(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-lost:
			return err
		case <-c.kick:
		case <-tick.C:
		case wr, ok := <-wn:
			if !ok || wr.Err() != nil {
				return nil // re-read and re-watch
			}
			c.mu.Lock()
			for _, ev := range wr.Events {
				c.applyNode(ev.Kv, ev.Type == mvccpb.DELETE)
			}
			c.notifyLocked()
			c.mu.Unlock()
		case wr, ok := <-wo:
			if !ok || wr.Err() != nil {
				return nil
			}
			c.mu.Lock()
			for _, ev := range wr.Events {
				c.applyOwner(ev.Kv, ev.Type == mvccpb.DELETE)
			}
			c.notifyLocked()
			c.mu.Unlock()
		}
		if !c.paused.Load() && !c.Serving() {
			return errLeaseExpired
		}
		c.reconcile(ctx)
	}
}

func (c *Cluster) applyNode(kv *mvccpb.KeyValue, deleted bool) {
	id, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), c.prefix+"nodes/"))
	if err != nil {
		return
	}
	if deleted {
		delete(c.nodes, int32(id))
		return
	}
	var ni nodeInfo
	if json.Unmarshal(kv.Value, &ni) != nil {
		return
	}
	b := server.Broker{NodeID: int32(id), Host: ni.Host, Port: ni.Port, Rack: ni.Rack}
	for _, e := range ni.Listeners {
		b.Endpoints = append(b.Endpoints, server.Endpoint{Listener: e.Name, Host: e.Host, Port: e.Port})
	}
	c.nodes[int32(id)] = b
}

func (c *Cluster) applyOwner(kv *mvccpb.KeyValue, deleted bool) {
	p, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), etcdstore.OwnerPrefix(c.prefix)))
	if err != nil || p < 0 || p >= c.cfg.Partitions {
		return
	}
	// Our own acquisitions and hand-overs update the view before their
	// watch events arrive; skip events older than what we know.
	if kv.ModRevision <= c.ownRev[int32(p)] {
		return
	}
	c.ownRev[int32(p)] = kv.ModRevision
	if deleted {
		delete(c.owners, int32(p))
		return
	}
	id, err := strconv.Atoi(string(kv.Value))
	if err != nil {
		return
	}
	c.owners[int32(p)] = owner{node: int32(id), createRev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
}

// reconcile releases the partitions this node should no longer serve and
// acquires free ones it should. Each etcd call is bounded; failures are
// retried on the next tick.
func (c *Cluster) reconcile(ctx context.Context) {
	if c.paused.Load() || !c.Serving() {
		return
	}
	c.mu.Lock()
	me := c.cfg.NodeID
	_, registered := c.nodes[me]
	ids := make([]int32, 0, len(c.nodes))
	for id := range c.nodes {
		ids = append(ids, id)
	}
	target := Assign(c.cfg.Partitions, ids)
	var release, acquire []int32
	var lostKeys []int32
	for p, rev := range c.mine {
		o, ok := c.owners[p]
		if ok && o.createRev != rev {
			lostKeys = append(lostKeys, p) // someone else holds it now
		} else if target[p] != me || !registered {
			release = append(release, p)
		}
	}
	var adopt, stray []int32
	if registered {
		for p, t := range target {
			if _, mine := c.mine[int32(p)]; t == me && !mine {
				o, held := c.owners[int32(p)]
				switch {
				case !held:
					acquire = append(acquire, int32(p))
				case o.lease == c.lease && o.node == me:
					adopt = append(adopt, int32(p)) // our key, not served (e.g. an acquire whose answer was lost)
				}
			}
		}
	}
	for p, o := range c.owners {
		if _, mine := c.mine[p]; !mine && o.lease == c.lease && o.node == me && target[p] != me {
			stray = append(stray, p)
		}
	}
	lease := c.lease
	c.mu.Unlock()

	for _, p := range lostKeys {
		c.drop(p)
		c.log.Warn("cluster: lost ownership", "partition", p)
	}
	for _, p := range adopt {
		c.mu.Lock()
		rev := c.owners[p].createRev
		c.mine[p] = rev
		c.notifyLocked()
		c.mu.Unlock()
		c.cfg.Store.SetOwner(p, rev)
		c.coord.Acquire(p)
	}
	for _, p := range stray {
		c.mu.Lock()
		rev := c.owners[p].createRev
		c.mu.Unlock()
		c.handOver(p, rev)
	}
	for _, p := range release {
		c.handOver(p, c.drop(p))
		c.log.Debug("cluster: released", "partition", p)
	}
	if len(acquire) > 0 {
		c.acquire(ctx, acquire, lease)
	}
}

// handOver deletes p's ownership key if it is still the one created at rev,
// so that p's next owner can take it at once.
func (c *Cluster) handOver(p int32, rev int64) {
	tctx, cancel := c.timeout()
	resp, err := c.cfg.Client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(c.ownKey(p)), "=", rev)).
		Then(clientv3.OpDelete(c.ownKey(p))).Commit()
	cancel()
	if err != nil {
		c.log.Warn("cluster: handing over partition (its key stays until the lease ends)", "partition", p, "err", err)
		return
	}
	if resp.Succeeded {
		c.mu.Lock()
		if resp.Header.Revision > c.ownRev[p] {
			delete(c.owners, p)
			c.ownRev[p] = resp.Header.Revision
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
	c.cfg.Store.ClearOwner(p)
	c.coord.Release(p)
	return rev
}

// acquire takes free partitions: one transaction per partition (so that
// one taken meanwhile by another node does not fail the others).
func (c *Cluster) acquire(ctx context.Context, ps []int32, lease clientv3.LeaseID) {
	val := strconv.Itoa(int(c.cfg.NodeID))
	for _, p := range ps {
		if ctx.Err() != nil || !c.Serving() {
			return
		}
		k := c.ownKey(p)
		tctx, cancel := c.timeout()
		resp, err := c.cfg.Client.Txn(tctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, val, clientv3.WithLease(lease))).Commit()
		cancel()
		if err != nil {
			c.log.Debug("cluster: acquiring", "partition", p, "err", err)
			return
		}
		if !resp.Succeeded {
			continue
		}
		rev := resp.Header.Revision
		c.mu.Lock()
		c.mine[p] = rev
		if rev > c.ownRev[p] {
			c.owners[p] = owner{node: c.cfg.NodeID, createRev: rev, lease: lease}
			c.ownRev[p] = rev
		}
		c.notifyLocked()
		c.mu.Unlock()
		c.cfg.Store.SetOwner(p, rev)
		c.coord.Acquire(p)
		c.log.Debug("cluster: acquired", "partition", p, "rev", rev)
	}
}

// releaseAll stops serving everything (lease lost or closing).
func (c *Cluster) releaseAll(why string) {
	ps := c.OwnedPartitions()
	for _, p := range ps {
		c.drop(p)
	}
	c.deadline.Store(0)
	if len(ps) > 0 {
		c.log.Warn("cluster: stopped serving all partitions", "why", why, "partitions", len(ps))
	}
}

// revokeOld revokes the leases of ended sessions (best effort, bounded):
// their keys, if etcd still has them, then go at once instead of at expiry.
func (c *Cluster) revokeOld() {
	c.mu.Lock()
	old := c.leases
	c.leases = nil
	c.mu.Unlock()
	var keep []clientv3.LeaseID
	for _, id := range old {
		ctx, cancel := context.WithTimeout(c.ctx, time.Second)
		_, err := c.cfg.Client.Revoke(ctx, id)
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
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
	c.releaseAll("closing")
	c.mu.Lock()
	leases := c.leases
	c.mu.Unlock()
	for _, id := range leases {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.cfg.Client.Revoke(ctx, id)
		cancel()
	}
	return nil
}
