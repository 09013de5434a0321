package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/catalog"
)

// casKeys reads and writes the records of the topic catalog and the group
// configs in etcd, which every node of a cluster changes. A write goes
// through only if the key is still at the revision this node last read or
// wrote (an etcd transaction comparing its ModRevision); otherwise it
// returns a *catalog.Conflict with the key's current value, and the catalog
// applies its change again to that. So changes made at the same moment
// through two nodes are both kept, where a plain write would let the later
// one silently drop the other.
//
// Every read and write of one key happens under the catalog's lock
// (catalog.Sync, SyncGroupConfig and the Persist calls), so the revision
// kept for a key always goes with the value the catalog holds.
type casKeys struct {
	cli *clientv3.Client
	// max is the largest value written (etcdstore.Store.MaxRecordBytes,
	// below etcd's default request limit).
	max int
	mu  sync.Mutex
	rev map[string]int64 // key -> ModRevision the catalog last took (0: no such key); absent: not known
}

func newCASKeys(cli *clientv3.Client, max int) *casKeys {
	return &casKeys{cli: cli, max: max, rev: map[string]int64{}}
}

// read returns key's value (nil if it has none) and its revision, which
// the caller remembers (setRev) only once the catalog has taken the value:
// a record it cannot read (a newer version's, or damaged) must never be
// written over as if this node had seen it.
func (k *casKeys) read(ctx context.Context, key string) ([]byte, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	r, err := k.cli.Get(rctx, key)
	if err != nil {
		return nil, 0, err
	}
	if len(r.Kvs) == 0 {
		return nil, 0, nil
	}
	return r.Kvs[0].Value, r.Kvs[0].ModRevision, nil
}

// sync has the catalog take key's value through apply (catalog.Sync or
// SyncGroupConfig, given the read), and remembers the revision read if it
// did.
func (k *casKeys) sync(ctx context.Context, key string, apply func(read func() ([]byte, error)) error) error {
	var rev int64
	err := apply(func() ([]byte, error) {
		v, r, err := k.read(ctx, key)
		rev = r
		return v, err
	})
	if err == nil {
		k.setRev(key, rev)
	}
	return err
}

func (k *casKeys) setRev(key string, rev int64) {
	k.mu.Lock()
	k.rev[key] = rev
	k.mu.Unlock()
}

// write stores val at key (nil: deletes it; what names it in errors) if nobody changed the key since
// this node last read or wrote it. A key never read (the node loaded it
// through the store at start) is read first, and the catalog is asked to
// apply its change to what it holds. An error other than a Conflict leaves
// the revision unknown (the write may or may not have happened), so the next
// write reads the key first.
func (k *casKeys) write(key, what string, val []byte) error {
	if len(val) > k.max {
		return fmt.Errorf("%s would take %d bytes in etcd, more than the %d one record may hold", what, len(val), k.max)
	}
	k.mu.Lock()
	rev, known := k.rev[key]
	delete(k.rev, key)
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !known {
		cur, curRev, err := k.read(ctx, key)
		if err != nil {
			return fmt.Errorf("reading %s from etcd: %w", what, err)
		}
		return &catalog.Conflict{Current: cur, Accepted: func() { k.setRev(key, curRev) }}
	}
	op := clientv3.OpPut(key, string(val))
	if val == nil {
		op = clientv3.OpDelete(key)
	}
	r, err := k.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrRequestTooLarge) {
			err = fmt.Errorf("%w (%d bytes: more than this etcd's --max-request-bytes)", err, len(val))
		}
		return fmt.Errorf("writing %s to etcd: %w", what, err)
	}
	if r.Succeeded {
		if val != nil {
			k.setRev(key, r.Header.Revision)
		} // a deleted key is read again before it is next written: nothing kept per deleted group
		return nil
	}
	var cur []byte
	var curRev int64
	if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		cur, curRev = kvs[0].Value, kvs[0].ModRevision
	}
	return &catalog.Conflict{Current: cur, Accepted: func() { k.setRev(key, curRev) }}
}
