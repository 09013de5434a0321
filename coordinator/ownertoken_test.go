package coordinator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

// tokenStore is a fenced store's ownership tokens over memstore: it
// records the ownership every append was made under.
type tokenStore struct {
	store.Store
	mu     sync.Mutex
	tokens map[int32]int64
	owners []int64 // of each AppendOwned / AppendMulti batch, in order
}

func (s *tokenStore) OwnerToken(p int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[p]
}

func (s *tokenStore) AppendOwned(ctx context.Context, p int32, owner int64, recs []store.Record) error {
	s.mu.Lock()
	s.owners = append(s.owners, owner)
	s.mu.Unlock()
	return s.Store.Append(ctx, p, recs)
}

func (s *tokenStore) set(p int32, tok int64) {
	s.mu.Lock()
	s.tokens[p] = tok
	s.mu.Unlock()
}

func (s *tokenStore) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.owners) == 0 {
		return 0
	}
	return s.owners[len(s.owners)-1]
}

type multiTokenStore struct{ *tokenStore }

func (s multiTokenStore) AppendMulti(ctx context.Context, batches []store.PartitionRecords) error {
	for _, b := range batches {
		if err := s.AppendOwned(ctx, b.Partition, b.Owner, b.Records); err != nil {
			return err
		}
	}
	return nil
}

// TestBatchesCarryTheirOwnership: with a store that has ownership tokens
// (cluster mode's etcd store), every batch is written with the token of the
// ownership its partition was loaded under, through the per-partition
// writer and the cross-partition committer alike, and a partition released
// and acquired again writes with the new token, so that the store can refuse
// a batch of the earlier ownership (store/etcd TestFencingByOwnership).
func TestBatchesCarryTheirOwnership(t *testing.T) {
	for _, multi := range []bool{false, true} {
		ts := &tokenStore{Store: memstore.New(), tokens: map[int32]int64{}}
		var st store.Store = ts
		if multi {
			st = multiTokenStore{ts}
		}
		const grp = "g-owned"
		p := PartitionFor(grp, 8)
		ts.set(p, 7)
		c, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: st, Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000))})
		if err != nil {
			t.Fatal(err)
		}
		if (c.multi != nil) != multi {
			t.Fatalf("multi=%v: the committer is %v", multi, c.multi)
		}
		c.Start()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
		e := &env{t: t, c: c}
		commit := func(o int64) {
			t.Helper()
			if r := e.do(commitRequest(grp, "", -1, "t", o)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("multi=%v: commit %d: error %d", multi, o, r.Topics[0].Partitions[0].ErrorCode)
			}
		}
		commit(1)
		if got := ts.last(); got != 7 {
			t.Fatalf("multi=%v: written under ownership %d, want 7", multi, got)
		}
		// Lost, then owned again under a new token.
		c.Release(p)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			r := e.do(commitRequest(grp, "", -1, "t", 2)).(*kmsg.OffsetCommitResponse)
			if r.Topics[0].Partitions[0].ErrorCode == group.ErrNotCoordinator {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("multi=%v: never released", multi)
			}
		}
		ts.set(p, 9)
		c.Acquire(p)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			r := e.do(commitRequest(grp, "", -1, "t", 2)).(*kmsg.OffsetCommitResponse)
			if r.Topics[0].Partitions[0].ErrorCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("multi=%v: never served again", multi)
			}
		}
		if got := ts.last(); got != 9 {
			t.Fatalf("multi=%v: after a new ownership written under %d, want 9", multi, got)
		}
		cancel()
		c.Close()
	}
}
