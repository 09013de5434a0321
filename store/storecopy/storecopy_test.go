package storecopy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
	"github.com/cohort-dev/cohort/store/memstore"
	"github.com/cohort-dev/cohort/store/storecopy"
)

// fill writes n records into partition p of st (values of size bytes,
// each distinct) in appends of at most 100 records.
func fill(t *testing.T, st store.Store, p int32, n, size int, prefix string) {
	t.Helper()
	var recs []store.Record
	for i := range n {
		v := bytes.Repeat([]byte{byte(i)}, size)
		copy(v, fmt.Sprint(i))
		recs = append(recs, store.Record{Key: fmt.Appendf(nil, "%s%05d", prefix, i), Value: v})
		if len(recs) == 100 || i == n-1 {
			if err := st.Append(context.Background(), p, recs); err != nil {
				t.Fatal(err)
			}
			recs = nil
		}
	}
}

// summaries describes partitions parts of st.
func summaries(t *testing.T, st store.Store, parts ...int32) []storecopy.Stats {
	t.Helper()
	var out []storecopy.Stats
	for _, p := range parts {
		s, err := storecopy.Summarize(context.Background(), st, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestCopyThroughEtcdLimits copies a partition of 2,500 records (4 MiB)
// into etcd run with its default limits, 128 operations and 1.5 MiB a
// request: far more than one transaction holds, and more than one of
// Copy's batches. Every record arrives, as the digest of the partition read
// back says; and back from etcd (three pages of Load) into a memory store.
// An empty partition and the negative (node-wide) ones are copied alike.
func TestCopyThroughEtcdLimits(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx := context.Background()
	src := memstore.New()
	fill(t, src, 3, 2000, 10, "o")
	fill(t, src, 3, 500, 8<<10, "g")
	fill(t, src, -1, 3, 20, "topic/")
	fill(t, src, -2, 2, 40, "u/")
	parts := []int32{-2, -1, 0, 3}

	dst, err := etcd.New(etcd.Options{Client: ec.Client(t), Prefix: "/copy/"})
	if err != nil {
		t.Fatal(err)
	}
	var copied []storecopy.Stats
	for _, p := range parts {
		s, err := storecopy.Copy(ctx, src, dst, p, storecopy.Options{})
		if err != nil {
			t.Fatalf("copy of partition %d into etcd: %v", p, err)
		}
		copied = append(copied, s)
	}
	if copied[3].Records != 2500 || copied[3].Bytes < 4e6 {
		t.Fatalf("partition 3: copied %d records, %d bytes; want 2500, over 4 MB", copied[3].Records, copied[3].Bytes)
	}
	want := summaries(t, src, parts...)
	if d := storecopy.Diff(want, copied); d != nil {
		t.Fatalf("what Copy read differs from the source: %v", d)
	}
	if d := storecopy.Diff(want, summaries(t, dst, parts...)); d != nil {
		t.Fatalf("etcd after the copy: %v", d)
	}

	back := memstore.New()
	for _, p := range parts {
		if _, err := storecopy.Copy(ctx, dst, back, p, storecopy.Options{BatchRecords: 300}); err != nil {
			t.Fatalf("copy of partition %d from etcd: %v", p, err)
		}
	}
	if d := storecopy.Diff(want, summaries(t, back, parts...)); d != nil {
		t.Fatalf("copied back from etcd: %v", d)
	}
}

// lossy drops every seventh record appended to partition 0 and changes a
// byte of the second record appended to partition 1.
type lossy struct {
	store.Store
	n map[int32]int
}

func (l *lossy) Append(ctx context.Context, p int32, recs []store.Record) error {
	var kept []store.Record
	for _, r := range recs {
		l.n[p]++
		switch {
		case p == 0 && l.n[p]%7 == 0:
			continue
		case p == 1 && l.n[p] == 2:
			r.Value = append([]byte{'!'}, r.Value[1:]...)
		}
		kept = append(kept, r)
	}
	return l.Store.Append(ctx, p, kept)
}

// TestDiffFindsLossAndDamage: a destination that lost records, or holds a
// record whose value changed (same length), is reported partition by
// partition; an identical one is not.
func TestDiffFindsLossAndDamage(t *testing.T) {
	ctx := context.Background()
	src := memstore.New()
	fill(t, src, 0, 20, 5, "a")
	fill(t, src, 1, 6, 5, "b")
	fill(t, src, 2, 3, 5, "c")
	want := summaries(t, src, 0, 1, 2)

	dst := &lossy{Store: memstore.New(), n: map[int32]int{}}
	for _, p := range []int32{0, 1, 2} {
		if _, err := storecopy.Copy(ctx, src, dst, p, storecopy.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	got := storecopy.Diff(want, summaries(t, dst.Store, 0, 1, 2))
	if len(got) != 2 || !strings.Contains(got[0], "partition 0: source 20 records") ||
		!strings.Contains(got[1], "partition 1: 6 records on both sides, but their digests differ") {
		t.Fatalf("Diff of a lossy copy: %q", got)
	}
	if got := storecopy.Diff(want, want[:2]); len(got) != 1 || got[0] != "partition 2: not read back from the destination" {
		t.Fatalf("Diff with a partition missing: %q", got)
	}
	if got := storecopy.Diff(want[:2], want); len(got) != 1 || got[0] != "partition 2: in the destination only" {
		t.Fatalf("Diff with a partition more: %q", got)
	}
	if got := storecopy.Diff(want, summaries(t, src, 2, 1, 0)); got != nil {
		t.Fatalf("Diff of identical partitions: %q", got)
	}
}

// barrier is a store whose Appends all wait until n of them are in flight
// at once (or their context ends).
type barrier struct {
	store.Store
	n, in int
	mu    sync.Mutex
	all   chan struct{}
}

func (b *barrier) Append(ctx context.Context, p int32, recs []store.Record) error {
	b.mu.Lock()
	if b.in++; b.in == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		return fmt.Errorf("%d appends started, none let through: want %d in flight at once: %w", b.in, b.n, ctx.Err())
	}
	return b.Store.Append(ctx, p, recs)
}

// TestCopyAllKeepsPartitionsInFlight: CopyAll and SummarizeAll work on
// opts.Parallel partitions at once, which etcd commits together (a copy
// one partition at a time waits for one consensus round and fsync per
// transaction): a destination whose appends proceed only once four are in
// flight receives every record. A failure in one partition stops the
// others and is returned.
func TestCopyAllKeepsPartitionsInFlight(t *testing.T) {
	src := memstore.New()
	parts := []int32{-2, -1, 0, 1, 2, 3, 4, 5}
	for _, p := range parts {
		fill(t, src, p, 30, 10, fmt.Sprintf("p%d-", p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dst := &barrier{Store: memstore.New(), n: 4, all: make(chan struct{})}
	got, err := storecopy.CopyAll(ctx, src, dst, parts, storecopy.Options{Parallel: 4, BatchRecords: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := storecopy.SummarizeAll(ctx, src, parts, storecopy.Options{Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	back, err := storecopy.SummarizeAll(ctx, dst.Store, parts, storecopy.Options{Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d := storecopy.Diff(want, got); d != nil {
		t.Fatalf("what CopyAll read: %v", d)
	}
	if d := storecopy.Diff(want, back); d != nil {
		t.Fatalf("what the destination holds: %v", d)
	}

	// One at a time, so that what runs after the failure is certain (with
	// two, the other worker may finish every remaining partition before
	// the failure cancels them): partition -1 fails, nothing after it is
	// copied.
	stop := errors.New("stopped by the test")
	var calls atomic.Int32
	_, err = storecopy.CopyAll(ctx, src, memstore.New(), parts, storecopy.Options{Parallel: 1}, func(s storecopy.Stats) error {
		calls.Add(1)
		if s.Partition == -1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls.Load() != 2 {
		t.Fatalf("CopyAll with its second partition failing: %v after %d partitions, want the failure after 2", err, calls.Load())
	}
}
