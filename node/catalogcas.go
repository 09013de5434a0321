package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// (catalog.SyncTopic, SyncTopics, SyncGroupConfig and the persist calls), so the revision
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

// sync has the catalog take key's value through apply (catalog.SyncTopic or
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
		if rev == 0 {
			// No such key (deleted, often by this node or another one
			// through the watch): nothing is kept for it, or a node
			// would keep an entry for every topic or group config ever
			// deleted in the cluster. The next write reads it first.
			k.forget(key)
		} else {
			k.setRev(key, rev)
		}
	}
	return err
}

// forget drops what is known of key's revision.
func (k *casKeys) forget(key string) {
	k.mu.Lock()
	delete(k.rev, key)
	k.mu.Unlock()
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

// readPrefix returns the values of every key under prefix, by the key after
// the prefix, and their revisions by full key.
func (k *casKeys) readPrefix(ctx context.Context, prefix string) (map[string][]byte, map[string]int64, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := k.cli.Get(rctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, err
	}
	vals, revs := make(map[string][]byte, len(r.Kvs)), make(map[string]int64, len(r.Kvs))
	for _, kv := range r.Kvs {
		vals[strings.TrimPrefix(string(kv.Key), prefix)] = kv.Value
		revs[string(kv.Key)] = kv.ModRevision
	}
	return vals, revs, nil
}

// syncPrefix is sync for every key under prefix at once (catalog.SyncTopics,
// given one read of them all).
func (k *casKeys) syncPrefix(ctx context.Context, prefix string, apply func(read func() (map[string][]byte, error)) error) error {
	var revs map[string]int64
	err := apply(func() (map[string][]byte, error) {
		vals, r, err := k.readPrefix(ctx, prefix)
		revs = r
		return vals, err
	})
	if err == nil {
		k.mu.Lock()
		// Keys under prefix that the read did not return were deleted
		// (while the watch was down): forgotten, as sync forgets them.
		for key := range k.rev {
			if _, ok := revs[key]; !ok && strings.HasPrefix(key, prefix) {
				delete(k.rev, key)
			}
		}
		maps.Copy(k.rev, revs)
		k.mu.Unlock()
	}
	return err
}

// migrateOps is how many records one transaction of a catalog move writes
// (etcd refuses transactions of more than 128 operations by default).
const migrateOps = 100

// migrate writes records (by the key after prefix) under prefix and deletes
// legacyKey, the one record older nodes kept every topic in, in
// transactions that each go through only while legacyKey is still at the
// revision read first. It reports moved once it has written them all. If
// legacyKey is not at that revision (another node moved it meanwhile, and
// may have changed topics since) nothing more is written and what is under
// prefix is returned instead, as current.
func (k *casKeys) migrate(legacyKey, prefix string, records map[string][]byte) (moved bool, current map[string][]byte, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	other := func() (bool, map[string][]byte, error) {
		vals, _, err := k.readPrefix(ctx, prefix)
		return false, vals, err
	}
	_, rev, err := k.read(ctx, legacyKey)
	if err != nil {
		return false, nil, err
	}
	if rev == 0 {
		return other()
	}
	guard := clientv3.Compare(clientv3.ModRevision(legacyKey), "=", rev)
	var ops []clientv3.Op
	size := 0
	commit := func() (bool, error) {
		r, err := k.cli.Txn(ctx).If(guard).Then(ops...).Commit()
		ops, size = ops[:0], 0
		return err == nil && r.Succeeded, err
	}
	for _, key := range slices.Sorted(maps.Keys(records)) {
		v := records[key]
		if len(ops) == migrateOps || len(ops) > 0 && size+len(prefix)+len(key)+len(v) > k.max {
			if ok, err := commit(); err != nil {
				return false, nil, err
			} else if !ok {
				return other()
			}
		}
		ops = append(ops, clientv3.OpPut(prefix+key, string(v)))
		size += len(prefix) + len(key) + len(v)
	}
	ops = append(ops, clientv3.OpDelete(legacyKey))
	if ok, err := commit(); err != nil {
		return false, nil, err
	} else if !ok {
		return other()
	}
	return true, nil, nil
}
