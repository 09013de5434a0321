package etcd_test

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// TestCompactorKeepsOneInterval: two nodes' compactors, stepped as their
// tickers would, compact etcd's history once per interval between them, up
// to the revision of the interval before, so history younger than one
// interval stays readable.
func TestCompactorKeepsOneInterval(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	ctx := context.Background()
	put := func() int64 {
		r, err := cli.Put(ctx, "/cohort/dx", "v")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	readable := func(rev int64) bool {
		_, err := cli.Get(ctx, "/cohort/dx", clientv3.WithRev(rev))
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatal(err)
		}
		return err == nil
	}
	step := func(c *etcdstore.Compactor) int64 {
		t.Helper()
		rev, err := c.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	a, b := etcdstore.NewCompactor(cli, ""), etcdstore.NewCompactor(cli, "")

	old := put()
	if rev := step(a); rev != 0 {
		t.Fatalf("a's first step compacted to %d; a first step only looks", rev)
	}
	if rev := step(b); rev != 0 {
		t.Fatalf("b compacted to %d in the interval a took", rev)
	}
	mid := put()
	// Next interval: a's turn again (it saw the key's version last).
	compacted := step(a)
	if compacted <= old || compacted >= mid {
		t.Fatalf("a compacted to %d, want the revision of its previous step (between %d and %d)", compacted, old, mid)
	}
	if rev := step(b); rev != 0 {
		t.Fatalf("b compacted to %d in the interval a took", rev)
	}
	if readable(old) {
		t.Fatalf("revision %d, older than the last interval, is still readable", old)
	}
	if !readable(mid) {
		t.Fatalf("revision %d, written in the last interval, was compacted", mid)
	}
	// b took its look after a's step above; if a stops (its node is
	// gone), b takes the next turns.
	last := put()
	if rev := step(b); rev <= compacted || rev >= last {
		t.Fatalf("b's turn compacted to %d, want past %d and before %d", rev, compacted, last)
	}
	if !readable(last) {
		t.Fatal("b compacted history of the last interval")
	}
}

// TestCompactorAllowed: without authentication etcd lets anyone compact;
// with it, only root (cohort's user, read-write on its prefix, may not).
func TestCompactorAllowed(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx := context.Background()
	if err := etcdstore.NewCompactor(ec.Client(t), "").Allowed(ctx); err != nil {
		t.Fatalf("without authentication: %v", err)
	}
	ec.EnableAuth(t, "root-pass", "/cohort/", map[string]string{"cohort": "pw"})
	user, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), Username: "cohort", Password: "pw", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if err := etcdstore.NewCompactor(user, "").Allowed(ctx); !errors.Is(err, etcdstore.ErrCompactDenied) {
		t.Fatalf("a user with read-write on its prefix: %v, want ErrCompactDenied", err)
	}
}
