// Package etcd is the cluster-mode store: the coordinator partitions' records
// live in etcd, and every write is fenced by this node's ownership of the
// partition.
//
// Layout under Options.Prefix (default "/cohort/"):
//
//	d<partition: 4 bytes big endian><record key>   record values (latest per key)
//	own/<partition in decimal>                       ownership key (package cluster), attached to the owner's lease
//
// Fencing: package cluster tells the store, with SetOwner, the create revision
// of the ownership key it acquired for a partition. Every transaction that
// writes a partition's records compares that create revision: if the key was
// deleted (the owner's lease expired, or it handed the partition over) or
// re-created by a successor, the transaction changes nothing and Append
// returns store.ErrNotOwner. A node that was paused past its lease can thus
// never overwrite its successor's state, whatever its own clock believes.
// Partitions below zero (node-wide data such as the topic catalog) are not
// fenced.
//
// Limits and atomicity: etcd bounds a transaction to --max-txn-ops operations
// (default 128) and a request to --max-request-bytes (default 1.5 MiB). An
// Append whose records (after keeping only the last record of each key) fit
// in one transaction is atomic. A larger one is split, in order, into several
// transactions, each atomic and each fenced; if one of them fails, Append
// returns the error and the transactions before it stay applied. The caller
// treats the whole Append as failed and acknowledges nothing; a prefix of an
// unacknowledged batch may survive (like a Kafka commit whose answer was
// lost), but nothing acknowledged is missing and each record is whole.
// Multi packs the batches of several partitions into shared transactions
// with one compare per partition involved.
package etcd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cohort-dev/cohort/store"
)

// DefaultPrefix is the prefix of a store's keys when Options.Prefix is empty.
const DefaultPrefix = "/cohort/"

// Options configures a Store.
type Options struct {
	// Client is the etcd client. Required. The store closes it on Close
	// only if CloseClient is set.
	Client      *clientv3.Client
	CloseClient bool
	// Prefix of every key (default DefaultPrefix).
	Prefix string
	// Fenced makes writes to partitions >= 0 require ownership (SetOwner).
	// Without it (one node, tests) writes are not compared.
	Fenced bool
	// Valid, if set, is asked before every fenced write; false means this
	// node must not write anything (its lease is presumed expired).
	Valid func() bool
	// MaxTxnOps caps the operations of one transaction (etcd's
	// --max-txn-ops, default 128). If etcd refuses a transaction as too
	// many operations (it runs with a lower --max-txn-ops), the store
	// halves the cap, logs so, and writes the same records in smaller
	// transactions; the same for MaxTxnBytes and a transaction etcd finds
	// too large.
	MaxTxnOps int
	// MaxTxnBytes caps the key and value bytes of one transaction (default
	// 1 MiB, below etcd's default --max-request-bytes of 1.5 MiB to leave
	// room for framing). A single record larger than this still goes out
	// alone; etcd rejects it if it exceeds --max-request-bytes.
	MaxTxnBytes int
	// LoadPageSize is the number of keys read per request by Load (1000).
	LoadPageSize int64
	// Logger receives the store's warnings (slog.Default if nil).
	Logger *slog.Logger
	// Timeout bounds every etcd request (default 5s): without quorum a write
	// fails with a retriable error instead of hanging.
	Timeout time.Duration
}

// Store implements store.Store and store.MultiAppender on etcd.
type Store struct {
	opts   Options
	cli    *clientv3.Client
	prefix string

	// txnOps and txnBytes are the caps transactions are packed to:
	// MaxTxnOps and MaxTxnBytes, lowered when etcd refuses a transaction
	// as too many operations or too large (lowerLimits).
	txnOps, txnBytes atomic.Int64

	mu     sync.RWMutex
	owners map[int32]int64 // partition -> create revision of our ownership key
	closed bool
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.MultiAppender = Multi{}
)

// Multi is the store with store.MultiAppender: the coordinator then packs
// the pending batches of all its partitions into shared transactions. The
// catch is fencing: the MultiAppender contract has one result for the whole
// call, so when one partition of a round has lost its ownership every
// partition in that round is answered NOT_COORDINATOR (clients look the
// coordinator up again and retry). *Store alone (one transaction stream per
// partition, which etcd batches into shared raft entries and fsyncs anyway)
// is what cluster mode uses; Multi exists for measurement.
type Multi struct{ *Store }

// AppendMulti implements store.MultiAppender.
func (m Multi) AppendMulti(ctx context.Context, batches []store.PartitionRecords) error {
	return m.appendBatches(ctx, batches)
}

// New returns a store on opts.Client.
func New(opts Options) (*Store, error) {
	if opts.Client == nil {
		return nil, errors.New("store/etcd: Options.Client is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = 128
	}
	if opts.MaxTxnBytes <= 0 {
		opts.MaxTxnBytes = 1 << 20
	}
	if opts.LoadPageSize <= 0 {
		opts.LoadPageSize = 1000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	s := &Store{opts: opts, cli: opts.Client, prefix: opts.Prefix, owners: map[int32]int64{}}
	s.txnOps.Store(int64(opts.MaxTxnOps))
	s.txnBytes.Store(int64(opts.MaxTxnBytes))
	return s, nil
}

// OwnerKey is the ownership key of partition p under prefix.
func OwnerKey(prefix string, p int32) string {
	return prefix + "own/" + strconv.Itoa(int(p))
}

// OwnerPrefix is the prefix of all ownership keys.
func OwnerPrefix(prefix string) string { return prefix + "own/" }

// Prefix returns the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

var _ store.RecordLimiter = (*Store)(nil)

// MaxRecordBytes is the largest record the store writes: MaxTxnBytes, below
// etcd's default request limit (store.RecordLimiter). A single larger record
// would go out in a transaction of its own and could exceed etcd's limit.
func (s *Store) MaxRecordBytes() int { return s.opts.MaxTxnBytes }

// SetOwner records that this node owns partition p through the ownership key
// created at revision createRev; writes to p compare it from now on.
func (s *Store) SetOwner(p int32, createRev int64) {
	s.mu.Lock()
	s.owners[p] = createRev
	s.mu.Unlock()
}

// OwnerToken implements store.OwnerTokens: the create revision of this
// node's ownership key of p, 0 if it owns none.
func (s *Store) OwnerToken(p int32) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.owners[p]
}

// AppendOwned implements store.OwnerTokens.
func (s *Store) AppendOwned(ctx context.Context, p int32, owner int64, recs []store.Record) error {
	return s.appendBatches(ctx, []store.PartitionRecords{{Partition: p, Records: recs, Owner: owner}})
}

// ClearOwner forgets p's ownership: later writes to p fail with
// store.ErrNotOwner without reaching etcd.
func (s *Store) ClearOwner(p int32) {
	s.mu.Lock()
	delete(s.owners, p)
	s.mu.Unlock()
}

// partPrefix is the key prefix of partition p's records.
func (s *Store) partPrefix(p int32) []byte {
	b := make([]byte, 0, len(s.prefix)+5)
	b = append(b, s.prefix...)
	b = append(b, 'd')
	return binary.BigEndian.AppendUint32(b, uint32(p))
}

// fence returns the compare guarding writes to p (nil if p is not fenced).
func (s *Store) fence(p int32) (*clientv3.Cmp, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if !s.opts.Fenced || p < 0 {
		return nil, nil
	}
	rev, ok := s.owners[p]
	if !ok || (s.opts.Valid != nil && !s.opts.Valid()) {
		return nil, fmt.Errorf("partition %d: %w", p, store.ErrNotOwner)
	}
	c := clientv3.Compare(clientv3.CreateRevision(OwnerKey(s.prefix, p)), "=", rev)
	return &c, nil
}

// sameOwnership refuses a batch produced under an earlier ownership of its
// partition than the current one (store.PartitionRecords.Owner): the
// transaction compares the current ownership key, which a batch taken
// before the partition left this node would pass once the node owns it
// again.
func (s *Store) sameOwnership(b store.PartitionRecords) error {
	if b.Owner == 0 || !s.opts.Fenced || b.Partition < 0 {
		return nil
	}
	if cur := s.OwnerToken(b.Partition); cur != b.Owner {
		return fmt.Errorf("partition %d: records of ownership %d, now %d: %w", b.Partition, b.Owner, cur, store.ErrNotOwner)
	}
	return nil
}

// Append implements store.Store.
func (s *Store) Append(ctx context.Context, p int32, recs []store.Record) error {
	return s.appendBatches(ctx, []store.PartitionRecords{{Partition: p, Records: recs}})
}

// op is one deduplicated write.
type op struct {
	part int32
	key  []byte // full etcd key
	val  []byte // nil = delete
}

// appendBatches packs the batches, in order, into as few transactions as the
// limits allow; each transaction compares the ownership of every partition
// it writes. If any partition is no longer owned, the call fails with
// store.ErrNotOwner.
func (s *Store) appendBatches(ctx context.Context, batches []store.PartitionRecords) error {
	fences := map[int32]*clientv3.Cmp{}
	var ops []op
	index := map[string]int{} // etcd key -> position in ops (last record of a key wins)
	for _, b := range batches {
		if _, ok := fences[b.Partition]; !ok {
			c, err := s.fence(b.Partition)
			if err != nil {
				return err
			}
			fences[b.Partition] = c
		}
		if err := s.sameOwnership(b); err != nil {
			return err
		}
		pp := s.partPrefix(b.Partition)
		for _, r := range b.Records {
			k := make([]byte, 0, len(pp)+len(r.Key))
			k = append(append(k, pp...), r.Key...)
			var v []byte
			if r.Value != nil {
				v = append(make([]byte, 0, len(r.Value)), r.Value...)
			}
			if i, ok := index[string(k)]; ok {
				ops[i].val = v
				continue
			}
			index[string(k)] = len(ops)
			ops = append(ops, op{part: b.Partition, key: k, val: v})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	// Pack into transactions. Compares count against the limit too.
	for start := 0; start < len(ops); {
		maxOps, maxBytes := int(s.txnOps.Load()), int(s.txnBytes.Load())
		var cmps []clientv3.Cmp
		seen := map[int32]bool{}
		var thens []clientv3.Op
		size := 0
		i := start
		for ; i < len(ops); i++ {
			o := ops[i]
			newCmp := !seen[o.part] && fences[o.part] != nil
			nc := len(cmps)
			if newCmp {
				nc++
			}
			sz := len(o.key) + len(o.val) + 16
			if i > start && (len(thens)+1 > maxOps || nc > maxOps || size+sz > maxBytes) {
				break
			}
			if newCmp {
				cmps = append(cmps, *fences[o.part])
			}
			seen[o.part] = true
			size += sz
			if o.val == nil {
				thens = append(thens, clientv3.OpDelete(string(o.key)))
			} else {
				thens = append(thens, clientv3.OpPut(string(o.key), string(o.val)))
			}
		}
		err := s.commit(ctx, cmps, thens)
		if err != nil && len(thens) > 1 && s.lowerLimits(err, len(thens), size) {
			continue // refused whole, nothing applied: the same records in smaller transactions
		}
		if err != nil {
			if len(thens) == 1 && tooLarge(err) {
				err = fmt.Errorf("%w (one record of %d bytes: more than etcd's --max-request-bytes)", err, size-16)
			}
			return err
		}
		start = i
	}
	return nil
}

// lowerLimits learns, from etcd refusing a transaction of ops operations
// and size bytes as too many operations or too large a request, that etcd
// runs with a lower --max-txn-ops or --max-request-bytes than the store's
// options assume: later transactions (and the retry of the refused one,
// which etcd applied none of) carry at most half as much. It reports
// whether err was such a refusal.
func (s *Store) lowerLimits(err error, ops, size int) bool {
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		if lowerTo(&s.txnOps, int64(max(ops/2, 1))) {
			s.log().Warn("store/etcd: etcd refused a transaction as too many operations: its --max-txn-ops is lower than cohort assumed; transactions now carry fewer operations (raise etcd's --max-txn-ops to 128 or more to avoid the failed attempts)",
				"operations", ops, "now_at_most", s.txnOps.Load())
		}
		return true
	case tooLarge(err):
		if lowerTo(&s.txnBytes, int64(max(size/2, 1))) {
			s.log().Warn("store/etcd: etcd refused a transaction as too large: its --max-request-bytes is lower than cohort assumed; transactions now carry fewer bytes (run etcd with --max-request-bytes of at least 1.5 MiB, its default: a single record over etcd's limit cannot be written)",
				"bytes", size, "now_at_most", s.txnBytes.Load())
		}
		return true
	}
	return false
}

// tooLarge tells whether err is etcd refusing a request as too large: etcd
// itself when the request exceeds its --max-request-bytes, or, 512 KiB
// beyond, its gRPC server, which then answers with gRPC's own message.
func tooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// lowerTo sets *v to n if n is lower; it reports whether it did.
func lowerTo(v *atomic.Int64, n int64) bool {
	for {
		cur := v.Load()
		if n >= cur {
			return false
		}
		if v.CompareAndSwap(cur, n) {
			return true
		}
	}
}

func (s *Store) log() *slog.Logger {
	if s.opts.Logger != nil {
		return s.opts.Logger
	}
	return slog.Default()
}

func (s *Store) commit(ctx context.Context, cmps []clientv3.Cmp, thens []clientv3.Op) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(thens...).Commit()
	if err != nil {
		return fmt.Errorf("store/etcd: txn of %d ops: %w", len(thens), err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("store/etcd: ownership compare failed: %w", store.ErrNotOwner)
	}
	return nil
}

// Load implements store.Store: a linearizable, paged read of the partition's
// prefix at one revision (a consistent snapshot).
func (s *Store) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	_, err := s.LoadRev(ctx, p, fn)
	return err
}

// LoadRev is Load, and returns the etcd revision it read the partition at.
func (s *Store) LoadRev(ctx context.Context, p int32, fn func(store.Record) error) (rev int64, err error) {
	rev, _, err = s.load(ctx, p, 0, fn)
	return rev, err
}

// LoadSince reads, in one linearizable read at etcd's current revision,
// the records of partition p modified after revision after (created or
// changed since; a key deleted since is not among them, etcd keeps no trace
// of it in the range) and the number of keys p holds: a reader that held p
// as of revision after learns what changed, and from the count whether any
// key it holds was deleted. It returns the revision read at. etcd still
// walks every key of the range to filter them, but sends only those changed.
func (s *Store) LoadSince(ctx context.Context, p int32, after int64, fn func(store.Record) error) (rev, count int64, err error) {
	if after <= 0 {
		return 0, 0, fmt.Errorf("store/etcd: LoadSince revision %d", after)
	}
	return s.load(ctx, p, after, fn)
}

// load is LoadRev with after 0, LoadSince otherwise (count is then the
// number of keys of p).
func (s *Store) load(ctx context.Context, p int32, after int64, fn func(store.Record) error) (rev, count int64, err error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return 0, 0, store.ErrClosed
	}
	pp := s.partPrefix(p)
	end := clientv3.GetPrefixRangeEnd(string(pp))
	from := string(pp)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(s.opts.LoadPageSize),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if after > 0 {
			opts = append(opts, clientv3.WithMinModRev(after+1))
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		var resp *clientv3.GetResponse
		if rev == 0 && after > 0 {
			// The count and the first page at one revision.
			var tr *clientv3.TxnResponse
			tr, err = s.cli.Txn(rctx).Then(
				clientv3.OpGet(string(pp), clientv3.WithRange(end), clientv3.WithCountOnly()),
				clientv3.OpGet(from, opts...)).Commit()
			if err == nil {
				count = tr.Responses[0].GetResponseRange().Count
				resp = (*clientv3.GetResponse)(tr.Responses[1].GetResponseRange())
				resp.Header = tr.Header
			}
		} else {
			resp, err = s.cli.Get(rctx, from, opts...)
		}
		cancel()
		if err != nil {
			return 0, 0, fmt.Errorf("store/etcd: loading partition %d: %w", p, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(store.Record{Key: bytes.TrimPrefix(kv.Key, pp), Value: nonNil(kv.Value)}); err != nil {
				return 0, 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, count, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.opts.CloseClient {
		return s.cli.Close()
	}
	return nil
}

// RecordKey is the etcd key under which record key k of partition p is
// stored (for watching a key, e.g. the topic catalog).
func (s *Store) RecordKey(p int32, k []byte) string {
	return string(s.partPrefix(p)) + string(k)
}
