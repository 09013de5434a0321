package disk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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
