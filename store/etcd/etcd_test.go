package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	"github.com/cohort-dev/cohort/store/storetest"
)

func TestConformance(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		s, err := etcd.New(etcd.Options{Client: cli, Prefix: fmt.Sprintf("/conf%d/", n)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
	storetest.RunPersistent(t, func(t *testing.T) func() store.Store {
		n++
		prefix := fmt.Sprintf("/persist%d/", n)
		return func() store.Store {
			s, _ := etcd.New(etcd.Options{Client: cli, Prefix: prefix})
			return s
		}
	})
}

// TestConformanceMulti runs the suite on the MultiAppender view too.
func TestConformanceMulti(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		s, _ := etcd.New(etcd.Options{Client: cli, Prefix: fmt.Sprintf("/multi%d/", n)})
		return etcd.Multi{Store: s}
	})
}

// TestSplitsAndPaging writes batches far above the transaction limits
// (ops and bytes) with small pages on load, and repeated keys in one batch
// (etcd refuses a transaction that names a key twice).
func TestSplitsAndPaging(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	s, _ := etcd.New(etcd.Options{Client: cli, Prefix: "/split/", MaxTxnOps: 16, MaxTxnBytes: 4096, LoadPageSize: 7})
	ctx := context.Background()
	var recs []store.Record
	want := map[string]string{}
	for i := 0; i < 1000; i++ {
		k := fmt.Sprintf("k%04d", i%700)
		v := strings.Repeat(fmt.Sprint(i), 1+i%50)
		recs = append(recs, store.Record{Key: []byte(k), Value: []byte(v)})
		want[k] = v
	}
	for i := 0; i < 700; i += 10 {
		k := fmt.Sprintf("k%04d", i)
		recs = append(recs, store.Record{Key: []byte(k)})
		delete(want, k)
	}
	if err := s.Append(ctx, 3, recs); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := s.Load(ctx, 3, func(r store.Record) error { got[string(r.Key)] = string(r.Value); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("loaded %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("key %s: got %q want %q", k, got[k], v)
		}
	}
}

// TestLoadSince: LoadSince reports the records created or changed after a
// revision LoadRev returned (over several pages), not the others, and the
// number of keys the partition holds, which a deletion lowers.
func TestLoadSince(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	s, _ := etcd.New(etcd.Options{Client: cli, Prefix: "/since/", LoadPageSize: 3})
	other, _ := etcd.New(etcd.Options{Client: cli, Prefix: "/since-other/"})
	ctx := context.Background()
	var recs []store.Record
	for i := range 20 {
		recs = append(recs, store.Record{Key: fmt.Appendf(nil, "k%02d", i), Value: []byte("v0")})
	}
	if err := s.Append(ctx, 3, recs); err != nil {
		t.Fatal(err)
	}
	rev, err := s.LoadRev(ctx, 3, func(store.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	// Changed since: k01, k05, k07 (changed), k20 (new), k09 (deleted, then
	// written again); k03 deleted; writes elsewhere move the revision on.
	if err := s.Append(ctx, 3, []store.Record{{Key: []byte("k01"), Value: []byte("v1")}, {Key: []byte("k03")},
		{Key: []byte("k05"), Value: []byte("v1")}, {Key: []byte("k09")}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Append(ctx, 3, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, 3, []store.Record{{Key: []byte("k07"), Value: []byte("v1")},
		{Key: []byte("k09"), Value: []byte("v1")}, {Key: []byte("k20"), Value: []byte("v1")}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	at, count, err := s.LoadSince(ctx, 3, rev, func(r store.Record) error { got[string(r.Key)] = string(r.Value); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k01": "v1", "k05": "v1", "k07": "v1", "k09": "v1", "k20": "v1"}
	if fmt.Sprint(got) != fmt.Sprint(want) || count != 20 || at <= rev {
		t.Fatalf("LoadSince(%d) = %v, %d keys at %d; want %v, 20 keys after %d", rev, got, count, at, want, rev)
	}
	got = map[string]string{}
	if _, count, err = s.LoadSince(ctx, 3, at, func(r store.Record) error { got[string(r.Key)] = string(r.Value); return nil }); err != nil || len(got) != 0 || count != 20 {
		t.Fatalf("LoadSince(%d) with no change since = %v, %d keys, %v; want nothing, 20 keys", at, got, count, err)
	}
}

// TestFencing: writes compare the ownership key's create revision. A store
// whose ownership key was deleted (lease expired) or re-created by another
// node (a successor) gets store.ErrNotOwner and writes nothing.
func TestFencing(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	ctx := context.Background()
	const prefix = "/fence/"
	a, _ := etcd.New(etcd.Options{Client: cli, Prefix: prefix, Fenced: true})
	b, _ := etcd.New(etcd.Options{Client: cli, Prefix: prefix, Fenced: true})
	rec := func(v string) []store.Record { return []store.Record{{Key: []byte("k"), Value: []byte(v)}} }

	// Not owned at all: refused locally.
	if err := a.Append(ctx, 0, rec("x")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("unowned append: %v", err)
	}
	// Unfenced partitions (the catalog's, -1) need no ownership.
	if err := a.Append(ctx, -1, rec("cat")); err != nil {
		t.Fatal(err)
	}
	// a acquires partition 0 with a short lease.
	lease, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	key := etcd.OwnerKey(prefix, 0)
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "a", clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatal(err, resp)
	}
	a.SetOwner(0, resp.Header.Revision)
	if err := a.Append(ctx, 0, rec("from-a")); err != nil {
		t.Fatal(err)
	}
	// a is "paused": no keepalive; its lease expires and b takes over.
	testwait.For(t, 30*time.Second, "a's lease expiring", func() bool {
		g, err := cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return len(g.Kvs) == 0
	})
	// Before anyone re-acquires: a's write is refused (key gone).
	if err := a.Append(ctx, 0, rec("stale-1")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("stale append after expiry: %v", err)
	}
	resp, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "b")).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatal(err, resp)
	}
	b.SetOwner(0, resp.Header.Revision)
	if err := b.Append(ctx, 0, rec("from-b")); err != nil {
		t.Fatal(err)
	}
	// a resumes, still believing it owns 0 (SetOwner never cleared).
	if err := a.Append(ctx, 0, rec("stale-2")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("stale append after takeover: %v", err)
	}
	if err := (etcd.Multi{Store: a}).AppendMulti(ctx, []store.PartitionRecords{{Partition: 0, Records: rec("stale-3")}}); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("stale multi append after takeover: %v", err)
	}
	var got string
	b.Load(ctx, 0, func(r store.Record) error { got = string(r.Value); return nil })
	if got != "from-b" {
		t.Fatalf("successor's value overwritten: %q", got)
	}
	// A Valid func that says no stops writes locally too.
	c, _ := etcd.New(etcd.Options{Client: cli, Prefix: prefix, Fenced: true, Valid: func() bool { return false }})
	c.SetOwner(0, resp.Header.Revision)
	if err := c.Append(ctx, 0, rec("invalid")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("append with expired local lease: %v", err)
	}
}

// TestFencingByOwnership: records carry the ownership they were produced
// under; once the partition was lost and owned again (a new ownership key),
// records of the earlier ownership are refused although the node owns the
// partition, by Append and AppendMulti alike, and nothing is written. Before,
// a batch taken before the partition left the node, written after it came
// back, passed the compare of the new key and overwrote what the owner in
// between had acknowledged.
func TestFencingByOwnership(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	cli := ec.Client(t)
	ctx := context.Background()
	const prefix = "/owned/"
	a, _ := etcd.New(etcd.Options{Client: cli, Prefix: prefix, Fenced: true})
	rec := func(v string) []store.Record { return []store.Record{{Key: []byte("k"), Value: []byte(v)}} }
	key := etcd.OwnerKey(prefix, 0)
	own := func() int64 {
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, "a")).Commit()
		if err != nil || !resp.Succeeded {
			t.Fatal(err, resp)
		}
		a.SetOwner(0, resp.Header.Revision)
		return resp.Header.Revision
	}
	first := own()
	if got := a.OwnerToken(0); got != first {
		t.Fatalf("OwnerToken = %d, want %d", got, first)
	}
	if err := a.AppendOwned(ctx, 0, first, rec("first")); err != nil {
		t.Fatal(err)
	}
	// Lost (the key deleted, as a hand-over does) and owned again.
	a.ClearOwner(0)
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := a.OwnerToken(0); got != 0 {
		t.Fatalf("OwnerToken after ClearOwner = %d", got)
	}
	second := own()
	if err := a.AppendOwned(ctx, 0, first, rec("stale")); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("append of the first ownership's records: %v", err)
	}
	multi := etcd.Multi{Store: a}
	if err := multi.AppendMulti(ctx, []store.PartitionRecords{{Partition: 0, Records: rec("stale-multi"), Owner: first}}); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("multi append of the first ownership's records: %v", err)
	}
	var got string
	a.Load(ctx, 0, func(r store.Record) error { got = string(r.Value); return nil })
	if got != "first" {
		t.Fatalf("value %q after refused stale writes, want first", got)
	}
	if err := multi.AppendMulti(ctx, []store.PartitionRecords{{Partition: 0, Records: rec("second"), Owner: second}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, 0, rec("unowned-token")); err != nil { // no token: the current ownership, as before
		t.Fatal(err)
	}
}
