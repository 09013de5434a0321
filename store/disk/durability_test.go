package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cohort-dev/cohort/store"
)

// TestEmptyKeyAndValueSurviveFold: a record whose key and value are both
// empty is a live key (an empty value is not a tombstone) before a fold,
// after one and after a restart. The fold's arena returned nil for an empty
// copy made before its first chunk, so the fold wrote a delete and the
// acknowledged record was gone.
func TestEmptyKeyAndValueSurviveFold(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, 3, []store.Record{{Key: []byte{}, Value: []byte{}}}); err != nil {
		t.Fatal(err)
	}
	count := func(s *Store, when string) {
		t.Helper()
		n := 0
		if err := s.Load(ctx, 3, func(r store.Record) error {
			if len(r.Key) != 0 || r.Value == nil || len(r.Value) != 0 {
				t.Errorf("%s: loaded %q=%v, want the empty key with an empty value", when, r.Key, r.Value)
			}
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("%s: %d records, want 1", when, n)
		}
	}
	count(s, "before the fold")
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	count(s, "after the fold")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir, Logger: discard}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	count(s, "after a restart")
}

// TestStartMultiFailedWroteNothing: a StartMulti that fails has written
// nothing, as store.Pipeliner promises: with its context already ended it
// returned an error while its entry was applied anyway (and synced by the
// next write).
func TestStartMultiFailedWroteNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	failed := 0
	for i := range 50 {
		b := []store.PartitionRecords{{Partition: 1, Records: []store.Record{{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}}}}
		wait, err := s.StartMulti(ended, b)
		if err != nil {
			failed++
			continue
		}
		if err := wait(); err != nil {
			t.Fatalf("wait of a StartMulti that succeeded: %v", err)
		}
	}
	if err := s.Append(context.Background(), 2, []store.Record{{Key: []byte("sync"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir, Logger: discard}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	loaded := 0
	if err := s.Load(context.Background(), 1, func(store.Record) error { loaded++; return nil }); err != nil {
		t.Fatal(err)
	}
	if failed == 0 || loaded != 50-failed {
		t.Fatalf("%d StartMulti failed and %d records were loaded: want some failures and exactly the others (%d) written", failed, loaded, 50-failed)
	}
}

// TestMalformedRecordLogKeyInTheMiddle: a record log key of the wrong
// length between two good entries is damage, reported by Load and by the
// fold, not read as an entry (openLog checks only the first and last keys).
func TestMalformedRecordLogKeyInTheMiddle(t *testing.T) {
	ctx := context.Background()
	s, err := Open(Options{Dir: t.TempDir(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b"} {
		if err := s.Append(ctx, 2, []store.Record{{Key: []byte(k), Value: []byte("1")}}); err != nil {
			t.Fatal(err)
		}
	}
	entry, err := appendEntry(nil, []store.PartitionRecords{{Partition: 2, Records: []store.Record{{Key: []byte("injected"), Value: []byte("x")}}}})
	if err != nil {
		t.Fatal(err)
	}
	first := s.folded.Load()
	bad := append(logKey(first), 0) // sorts between the first entry and the next
	if err := s.db.Set(bad, entry, nil); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%x", bad)
	err = s.Load(ctx, 2, func(r store.Record) error {
		if string(r.Key) == "injected" {
			t.Error("Load read the damaged key as an entry")
		}
		return nil
	})
	if !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "is damaged") || !strings.Contains(err.Error(), want) {
		t.Fatalf("Load: %v, want the store reported damaged, naming %s", err, want)
	}
	if err := s.Compact(ctx); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("fold: %v, want an error naming %s", err, want)
	}
}

// TestDamagedRecordLogFailsStore: damage in the record log found by a
// background fold (a key the store never writes, as a damaged table would
// show the engine's checksums failing) fails the store, as a failed write
// does: every later fold and every Load would meet the same damage (the log
// could never shrink again, no partition could load), and a restart refuses
// the store, so nothing more may be acknowledged into it.
func TestDamagedRecordLogFailsStore(t *testing.T) {
	ctx := context.Background()
	// In memory: a failed store leaves its engine open, still writing.
	s := openT(t, Options{Dir: "/store", fs: vfs.NewMem(), foldAt: 1 << 10})
	defer s.Close()
	if err := s.Append(ctx, 2, []store.Record{{Key: []byte("a"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	bad := append(logKey(s.folded.Load()), 0) // sorts after the first unfolded entry
	if err := s.db.Set(bad, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	// Append until a background fold starts, then wait for it. The append
	// that starts it may see the store fail before its own sync is done.
	var done <-chan struct{}
	value := bytes.Repeat([]byte("v"), 100)
	for i := 0; done == nil; i++ {
		err := s.Append(ctx, 2, []store.Record{{Key: []byte(fmt.Sprint("k", i)), Value: value}})
		s.seqMu.Lock()
		done = s.foldDone // set when the first fold starts
		s.seqMu.Unlock()
		if err != nil && (done == nil || !errors.Is(err, ErrStorage)) {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	<-done
	select {
	case <-s.Failed():
	default:
		t.Fatal("a fold met a damaged record log and the store goes on acknowledging appends")
	}
	want := fmt.Sprintf("%x", bad)
	if err := s.Err(); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), want) {
		t.Fatalf("Err() = %v, want ErrStorage saying the store is damaged and naming %s", err, want)
	}
	if strings.Contains(s.Err().Error(), "recovered on the next Open") {
		t.Errorf("Err() = %v promises a recovery the next Open refuses", s.Err())
	}
	if err := s.Append(ctx, 2, []store.Record{{Key: []byte("after"), Value: []byte("1")}}); !errors.Is(err, ErrStorage) {
		t.Fatalf("Append after the damage was found = %v, want ErrStorage", err)
	}
}
