package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
)

// ErrUnavailable is what MemLeases answers while it is down (as etcd without
// quorum, or a node cut off from it).
var ErrUnavailable = errors.New("cluster: lease store unavailable")

// MemLeases is an in-memory LeaseStore with etcd's semantics for what the
// cluster uses (one revision counter; create-if-absent; compare on the
// create revision; keys deleted with their lease), for deterministic tests.
// Time is the clock it is given: a lease expires, and its keys go, once the
// clock has passed its last renewal + TTL (checked on every call, so an
// expiry is visible to anyone as soon as the clock has been advanced). While
// the store is down nothing expires; when it comes back every lease gets at
// least a full TTL again, as etcd does when a new leader takes over.
//
// Faults are injected per node through Client: a node cut off from the
// store, or one whose answers are lost after the store applied its request.
type MemLeases struct {
	mu       sync.Mutex
	clk      clock.Clock
	rev      int64
	next     LeaseID
	down     bool
	leases   map[LeaseID]*memLease
	nodes    map[int32]memKV
	owners   map[int32]memKV
	watchers []*memWatcher
}

type memLease struct {
	ttl    time.Duration
	expiry time.Time
}

type memKV struct {
	val               []byte
	node              int32
	createRev, modRev int64
	lease             LeaseID
}

type memWatcher struct {
	ch   chan WatchBatch
	done bool
}

// NewMemLeases returns an empty store on clk.
func NewMemLeases(clk clock.Clock) *MemLeases {
	return &MemLeases{clk: clk, next: 1000, leases: map[LeaseID]*memLease{}, nodes: map[int32]memKV{}, owners: map[int32]memKV{}}
}

// SetDown takes the whole store away (true) or gives it back (false).
func (m *MemLeases) SetDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down && !down {
		now := m.clk.Now()
		for _, l := range m.leases {
			if e := now.Add(l.ttl); e.After(l.expiry) {
				l.expiry = e
			}
		}
	}
	m.down = down
}

// Holder returns p's ownership key as the store has it now.
func (m *MemLeases) Holder(p int32) (Holder, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked()
	kv, ok := m.owners[p]
	return Holder{Node: kv.node, CreateRev: kv.createRev, Lease: kv.lease}, ok
}

// Holders returns every ownership key as the store has it now.
func (m *MemLeases) Holders() map[int32]Holder {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked()
	out := make(map[int32]Holder, len(m.owners))
	for p, kv := range m.owners {
		out[p] = Holder{Node: kv.node, CreateRev: kv.createRev, Lease: kv.lease}
	}
	return out
}

// LeaseExpiry returns when lease id expires (false: it is gone).
func (m *MemLeases) LeaseExpiry(id LeaseID) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked()
	l, ok := m.leases[id]
	if !ok {
		return time.Time{}, false
	}
	return l.expiry, true
}

// expireLocked deletes the leases (and their keys) whose expiry has passed,
// in expiry order.
func (m *MemLeases) expireLocked() {
	if m.down {
		return
	}
	now := m.clk.Now()
	var due []LeaseID
	for id, l := range m.leases {
		if !now.Before(l.expiry) {
			due = append(due, id)
		}
	}
	slices.SortFunc(due, func(a, b LeaseID) int {
		if c := m.leases[a].expiry.Compare(m.leases[b].expiry); c != 0 {
			return c
		}
		return int(a - b)
	})
	for _, id := range due {
		m.revokeLocked(id)
	}
}

func (m *MemLeases) revokeLocked(id LeaseID) {
	delete(m.leases, id)
	m.rev++
	var b WatchBatch
	for _, n := range sortedKeys(m.nodes) {
		if m.nodes[n].lease == id {
			delete(m.nodes, n)
			b.Nodes = append(b.Nodes, NodeKV{ID: n, Deleted: true})
		}
	}
	for _, p := range sortedKeys(m.owners) {
		if m.owners[p].lease == id {
			delete(m.owners, p)
			b.Owners = append(b.Owners, OwnerKV{P: p, ModRev: m.rev, Deleted: true})
		}
	}
	m.notifyLocked(b)
}

func sortedKeys[V any](m map[int32]V) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (m *MemLeases) notifyLocked(b WatchBatch) {
	if len(b.Nodes)+len(b.Owners) == 0 {
		return
	}
	live := m.watchers[:0]
	for _, w := range m.watchers {
		if w.done {
			continue
		}
		select {
		case w.ch <- b:
			live = append(live, w)
		default: // too far behind: end the watch, the watcher reloads
			w.done = true
			close(w.ch)
		}
	}
	m.watchers = live
}

// begin is the opening of every call: the store must be up; expired leases
// go first.
func (m *MemLeases) begin() error {
	if m.down {
		return ErrUnavailable
	}
	m.expireLocked()
	return nil
}

// Grant implements LeaseStore.
func (m *MemLeases) Grant(_ context.Context, ttl time.Duration) (LeaseID, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return 0, 0, err
	}
	ttl = ttl.Round(time.Second)
	m.next++
	m.leases[m.next] = &memLease{ttl: ttl, expiry: m.clk.Now().Add(ttl)}
	return m.next, ttl, nil
}

// KeepAlive implements LeaseStore.
func (m *MemLeases) KeepAlive(_ context.Context, id LeaseID) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return 0, err
	}
	l, ok := m.leases[id]
	if !ok {
		return 0, ErrLeaseNotFound
	}
	l.expiry = m.clk.Now().Add(l.ttl)
	return l.ttl, nil
}

// Revoke implements LeaseStore.
func (m *MemLeases) Revoke(_ context.Context, id LeaseID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return err
	}
	if _, ok := m.leases[id]; !ok {
		return ErrLeaseNotFound
	}
	m.revokeLocked(id)
	return nil
}

// Register implements LeaseStore.
func (m *MemLeases) Register(_ context.Context, id int32, info []byte, lease LeaseID) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return false, err
	}
	if _, ok := m.leases[lease]; !ok {
		return false, ErrLeaseNotFound
	}
	if _, ok := m.nodes[id]; ok {
		return false, nil
	}
	m.rev++
	m.nodes[id] = memKV{val: slices.Clone(info), createRev: m.rev, modRev: m.rev, lease: lease}
	m.notifyLocked(WatchBatch{Nodes: []NodeKV{{ID: id, Info: slices.Clone(info)}}})
	return true, nil
}

// Acquire implements LeaseStore.
func (m *MemLeases) Acquire(_ context.Context, p, node int32, lease LeaseID) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return 0, false, err
	}
	if _, ok := m.leases[lease]; !ok {
		return 0, false, ErrLeaseNotFound
	}
	if _, ok := m.owners[p]; ok {
		return m.rev, false, nil
	}
	m.rev++
	m.owners[p] = memKV{node: node, createRev: m.rev, modRev: m.rev, lease: lease}
	m.notifyLocked(WatchBatch{Owners: []OwnerKV{{P: p, Holder: Holder{Node: node, CreateRev: m.rev, Lease: lease}, ModRev: m.rev}}})
	return m.rev, true, nil
}

// Release implements LeaseStore.
func (m *MemLeases) Release(_ context.Context, p int32, createRev int64) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return 0, false, err
	}
	if kv, ok := m.owners[p]; !ok || kv.createRev != createRev {
		return m.rev, false, nil
	}
	m.rev++
	delete(m.owners, p)
	m.notifyLocked(WatchBatch{Owners: []OwnerKV{{P: p, ModRev: m.rev, Deleted: true}}})
	return m.rev, true, nil
}

// Load implements LeaseStore.
func (m *MemLeases) Load(context.Context) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Rev: m.rev}
	for _, id := range sortedKeys(m.nodes) {
		s.Nodes = append(s.Nodes, NodeKV{ID: id, Info: slices.Clone(m.nodes[id].val)})
	}
	for _, p := range sortedKeys(m.owners) {
		kv := m.owners[p]
		s.Owners = append(s.Owners, OwnerKV{P: p, Holder: Holder{Node: kv.node, CreateRev: kv.createRev, Lease: kv.lease}, ModRev: kv.modRev})
	}
	return s, nil
}

// Watch implements LeaseStore. Changes are delivered from the moment of the
// call (the cluster always watches from the revision it has just loaded); a
// watcher more than 1024 batches behind is ended.
func (m *MemLeases) Watch(ctx context.Context, _ int64) <-chan WatchBatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := &memWatcher{ch: make(chan WatchBatch, 1024)}
	m.watchers = append(m.watchers, w)
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		if !w.done {
			w.done = true
			close(w.ch)
		}
	}()
	return w.ch
}

// Client returns node's handle on the store, through which faults are
// injected for that node alone.
func (m *MemLeases) Client() *MemClient { return &MemClient{m: m} }

// MemClient is one node's handle on a MemLeases.
type MemClient struct {
	m         *MemLeases
	mu        sync.Mutex
	cut       bool
	loseReply bool
}

var _ LeaseStore = (*MemClient)(nil)

// Cut cuts the node off from the store (true: every call fails without
// reaching it) or reconnects it.
func (c *MemClient) Cut(cut bool) {
	c.mu.Lock()
	c.cut = cut
	c.mu.Unlock()
}

// LoseReplies makes the store apply the node's requests but the node get an
// error instead of the answer (true), or stops that.
func (c *MemClient) LoseReplies(lose bool) {
	c.mu.Lock()
	c.loseReply = lose
	c.mu.Unlock()
}

func (c *MemClient) faults() (cut, lose bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut, c.loseReply
}

// errLostReply is what a node gets when its answer was lost.
var errLostReply = errors.New("cluster: reply lost")

func call[T any](c *MemClient, f func() (T, error)) (T, error) {
	var zero T
	cut, lose := c.faults()
	if cut {
		return zero, ErrUnavailable
	}
	v, err := f()
	if lose && err == nil {
		return zero, errLostReply
	}
	return v, err
}

type pair[A, B any] struct {
	a A
	b B
}

// Grant implements LeaseStore.
func (c *MemClient) Grant(ctx context.Context, ttl time.Duration) (LeaseID, time.Duration, error) {
	r, err := call(c, func() (pair[LeaseID, time.Duration], error) {
		id, t, err := c.m.Grant(ctx, ttl)
		return pair[LeaseID, time.Duration]{id, t}, err
	})
	return r.a, r.b, err
}

// KeepAlive implements LeaseStore.
func (c *MemClient) KeepAlive(ctx context.Context, id LeaseID) (time.Duration, error) {
	return call(c, func() (time.Duration, error) { return c.m.KeepAlive(ctx, id) })
}

// Revoke implements LeaseStore.
func (c *MemClient) Revoke(ctx context.Context, id LeaseID) error {
	_, err := call(c, func() (struct{}, error) { return struct{}{}, c.m.Revoke(ctx, id) })
	return err
}

// Register implements LeaseStore.
func (c *MemClient) Register(ctx context.Context, id int32, info []byte, lease LeaseID) (bool, error) {
	return call(c, func() (bool, error) { return c.m.Register(ctx, id, info, lease) })
}

// Acquire implements LeaseStore.
func (c *MemClient) Acquire(ctx context.Context, p, node int32, lease LeaseID) (int64, bool, error) {
	r, err := call(c, func() (pair[int64, bool], error) {
		rev, ok, err := c.m.Acquire(ctx, p, node, lease)
		return pair[int64, bool]{rev, ok}, err
	})
	return r.a, r.b, err
}

// Release implements LeaseStore.
func (c *MemClient) Release(ctx context.Context, p int32, createRev int64) (int64, bool, error) {
	r, err := call(c, func() (pair[int64, bool], error) {
		rev, ok, err := c.m.Release(ctx, p, createRev)
		return pair[int64, bool]{rev, ok}, err
	})
	return r.a, r.b, err
}

// Load implements LeaseStore.
func (c *MemClient) Load(ctx context.Context) (Snapshot, error) {
	return call(c, func() (Snapshot, error) { return c.m.Load(ctx) })
}

// Watch implements LeaseStore (a cut node's watch ends at once).
func (c *MemClient) Watch(ctx context.Context, rev int64) <-chan WatchBatch {
	if cut, _ := c.faults(); cut {
		ch := make(chan WatchBatch, 1)
		ch <- WatchBatch{Err: ErrUnavailable}
		close(ch)
		return ch
	}
	return c.m.Watch(ctx, rev)
}
