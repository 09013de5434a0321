package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestLeaseStoreMem and TestLeaseStoreEtcd run the same checks on both
// LeaseStores, so that the in-memory one the deterministic scenarios use
// behaves as etcd does for everything the cluster relies on.
func TestLeaseStoreMem(t *testing.T) {
	clk := clock.NewFake(simStart)
	m := NewMemLeases(clk)
	testLeaseStore(t, m, func(d time.Duration) { clk.Advance(d) })

	// Faults: a cut-off client reaches nothing; a lost reply still applies.
	c := m.Client()
	c.Cut(true)
	if _, _, err := c.Grant(context.Background(), 2*time.Second); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("cut client: %v", err)
	}
	c.Cut(false)
	id, _, err := c.Grant(context.Background(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.LoseReplies(true)
	if _, _, err := c.Acquire(context.Background(), 9, 4, id); err == nil {
		t.Fatal("lost reply answered")
	}
	if h, ok := m.Holder(9); !ok || h.Node != 4 {
		t.Fatalf("the acquisition whose reply was lost did not apply: %+v", h)
	}
	// The store down: nothing expires; back up: every lease has a TTL again.
	m.SetDown(true)
	clk.Advance(time.Minute)
	if _, ok := m.Holder(9); !ok {
		t.Fatal("a key expired while the store was down")
	}
	m.SetDown(false)
	if e, ok := m.LeaseExpiry(id); !ok || !e.Equal(clk.Now().Add(2*time.Second)) {
		t.Fatalf("lease after the store came back: expiry %v (%v)", e, ok)
	}
}

// TestLeaseStoreEtcd is the etcd side (an in-process one-member etcd;
// expiry is etcd's own and is not waited for here).
func TestLeaseStoreEtcd(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	testLeaseStore(t, &EtcdLeases{Client: ec.Client(t), Prefix: "/leasestore-test/"}, nil)
}

func testLeaseStore(t *testing.T, ls LeaseStore, advance func(time.Duration)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	l1, ttl, err := ls.Grant(ctx, 2*time.Second)
	must(err)
	if ttl != 2*time.Second {
		t.Fatalf("granted TTL %v", ttl)
	}
	l2, _, err := ls.Grant(ctx, 2*time.Second)
	must(err)
	ok, err := ls.Register(ctx, 1, []byte(`{"id":1}`), l1)
	must(err)
	again, err := ls.Register(ctx, 1, []byte(`{"id":1}`), l2)
	must(err)
	if !ok || again {
		t.Fatalf("register: first %v, second %v (want true, false)", ok, again)
	}
	ok, err = ls.Register(ctx, 2, []byte(`{"id":2}`), l2)
	must(err)
	if !ok {
		t.Fatal("register node 2")
	}

	snap, err := ls.Load(ctx)
	must(err)
	if len(snap.Nodes) != 2 || snap.Nodes[0].ID != 1 || string(snap.Nodes[0].Info) != `{"id":1}` || len(snap.Owners) != 0 {
		t.Fatalf("load: %+v", snap)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	w := ls.Watch(wctx, snap.Rev+1)

	rev, ok, err := ls.Acquire(ctx, 3, 1, l1)
	must(err)
	if !ok || rev <= snap.Rev {
		t.Fatalf("acquire: %v at %d (loaded at %d)", ok, rev, snap.Rev)
	}
	if _, ok, err := ls.Acquire(ctx, 3, 2, l2); err != nil || ok {
		t.Fatalf("acquire of a held key: %v %v", ok, err)
	}
	rev4, ok, err := ls.Acquire(ctx, 4, 2, l2)
	must(err)
	if !ok {
		t.Fatal("acquire 4")
	}
	// The watch shows both acquisitions with their holders.
	seen := map[int32]OwnerKV{}
	for len(seen) < 2 {
		seen = collect(t, w, seen)
	}
	if o := seen[3]; o.Deleted || o.Holder != (Holder{Node: 1, CreateRev: rev, Lease: l1}) || o.ModRev != rev {
		t.Fatalf("watched owner of 3: %+v", o)
	}
	snap, err = ls.Load(ctx)
	must(err)
	if len(snap.Owners) != 2 || snap.Owners[0].P != 3 || snap.Owners[0].Holder != (Holder{Node: 1, CreateRev: rev, Lease: l1}) {
		t.Fatalf("owners loaded: %+v", snap.Owners)
	}

	// Release compares the create revision.
	if _, ok, err := ls.Release(ctx, 3, rev+100); err != nil || ok {
		t.Fatalf("release with another revision: %v %v", ok, err)
	}
	drev, ok, err := ls.Release(ctx, 3, rev)
	must(err)
	if !ok || drev <= rev4 {
		t.Fatalf("release: %v at %d", ok, drev)
	}
	seen = collect(t, w, map[int32]OwnerKV{})
	if o := seen[3]; !o.Deleted || o.ModRev != drev {
		t.Fatalf("watched release: %+v", o)
	}

	// KeepAlive renews; Revoke deletes the lease's keys.
	ttl, err = ls.KeepAlive(ctx, l2)
	must(err)
	if ttl != 2*time.Second {
		t.Fatalf("keepalive TTL %v", ttl)
	}
	must(ls.Revoke(ctx, l2))
	if err := ls.Revoke(ctx, l2); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := ls.KeepAlive(ctx, l2); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("keepalive of a revoked lease: %v", err)
	}
	if _, _, err := ls.Acquire(ctx, 5, 2, l2); err == nil {
		t.Fatal("acquire on a revoked lease succeeded")
	}
	snap, err = ls.Load(ctx)
	must(err)
	if len(snap.Nodes) != 1 || snap.Nodes[0].ID != 1 || len(snap.Owners) != 0 {
		t.Fatalf("after revoke: %+v", snap)
	}

	if advance == nil {
		return
	}
	// Expiry: the lease lives TTL after its last renewal, not a moment more.
	advance(time.Second)
	_, err = ls.KeepAlive(ctx, l1)
	must(err)
	rev, ok, err = ls.Acquire(ctx, 6, 1, l1)
	must(err)
	if !ok {
		t.Fatal("acquire of a free partition on a renewed lease failed")
	}
	advance(2*time.Second - time.Nanosecond)
	snap, err = ls.Load(ctx)
	must(err)
	if len(snap.Nodes) != 1 || len(snap.Owners) != 1 {
		t.Fatalf("expired early: %+v", snap)
	}
	advance(time.Nanosecond)
	snap, err = ls.Load(ctx)
	must(err)
	if len(snap.Nodes) != 0 || len(snap.Owners) != 0 || snap.Rev <= rev {
		t.Fatalf("not expired at TTL: %+v", snap)
	}
	if _, err := ls.KeepAlive(ctx, l1); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("keepalive of an expired lease: %v", err)
	}
}

// collect reads one watch batch (waiting at most 10 s) into seen.
func collect(t *testing.T, w <-chan WatchBatch, seen map[int32]OwnerKV) map[int32]OwnerKV {
	t.Helper()
	select {
	case b, ok := <-w:
		if !ok || b.Err != nil {
			t.Fatalf("watch ended: %v", b.Err)
		}
		for _, o := range b.Owners {
			seen[o.P] = o
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event in 10 s")
	}
	return seen
}

// TestEtcdWatchFromCompactedRevision: a watch asked to start at a revision
// etcd's history no longer holds (compacted: store/etcd.Compactor) ends with
// an error, after which the cluster reads its state again and watches anew
// (watchLoop), rather than missing what the compaction took.
func TestEtcdWatchFromCompactedRevision(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := EtcdLeases{Client: cli, Prefix: "/compacted-watch/"}
	first, err := cli.Put(ctx, "/compacted-watch/nodes/x", "1")
	if err != nil {
		t.Fatal(err)
	}
	last, err := cli.Put(ctx, "/compacted-watch/nodes/x", "2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, last.Header.Revision); err != nil {
		t.Fatal(err)
	}
	select {
	case b, ok := <-ls.Watch(ctx, first.Header.Revision):
		if !ok || b.Err == nil {
			t.Fatalf("a watch from a compacted revision delivered %+v (open %v), want an error", b, ok)
		}
	case <-ctx.Done():
		t.Fatal("no answer from a watch from a compacted revision")
	}
}
