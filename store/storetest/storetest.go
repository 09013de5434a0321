// Package storetest is a conformance suite for store.Store implementations.
//
// Every implementation (memstore, the embedded disk store, a cluster store)
// runs the same checks of the Append/Load contract, so the coordinator can
// rely on one behaviour whichever store it is given:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return mystore.New(...) })
//	}
//
// Stores that survive Close also run RunPersistent, which reopens them.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/cohort-dev/cohort/store"
)

// Run runs the conformance suite. newStore must return a new, empty store
// for each call; Run closes it (closing twice must be harmless).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	open := func(t *testing.T) store.Store {
		s := newStore(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("EmptyPartition", func(t *testing.T) { testEmptyPartition(t, open(t)) })
	t.Run("LatestValueWins", func(t *testing.T) { testLatestValueWins(t, open(t)) })
	t.Run("Tombstones", func(t *testing.T) { testTombstones(t, open(t)) })
	t.Run("EmptyKeyAndValue", func(t *testing.T) { testEmptyKeyAndValue(t, open(t)) })
	t.Run("PartitionsIsolated", func(t *testing.T) { testPartitionsIsolated(t, open(t)) })
	t.Run("InputNotRetained", func(t *testing.T) { testInputNotRetained(t, open(t)) })
	t.Run("LoadCallbackError", func(t *testing.T) { testLoadCallbackError(t, open(t)) })
	t.Run("LargeValuesAndManyKeys", func(t *testing.T) { testLargeValuesAndManyKeys(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("Close", func(t *testing.T) { testClose(t, open(t)) })
}

// RunPersistent checks that a store's contents survive Close and reopen.
// newOpener must return a function that opens the same (initially empty)
// storage every time it is called; each store it returns is closed before
// the next is opened.
func RunPersistent(t *testing.T, newOpener func(t *testing.T) func() store.Store) {
	t.Helper()
	t.Run("Reopen", func(t *testing.T) {
		open := newOpener(t)
		s := open()
		want := map[int32]map[string]string{}
		for round := 0; round < 3; round++ {
			for p := int32(0); p < 4; p++ {
				var recs []store.Record
				for k := 0; k < 20; k++ {
					key := fmt.Sprintf("k%02d", k)
					if want[p] == nil {
						want[p] = map[string]string{}
					}
					if (k+round)%5 == 0 {
						recs = append(recs, store.Record{Key: []byte(key)})
						delete(want[p], key)
						continue
					}
					v := fmt.Sprintf("r%d-p%d-%s", round, p, key)
					recs = append(recs, store.Record{Key: []byte(key), Value: []byte(v)})
					want[p][key] = v
				}
				mustAppend(t, s, p, recs...)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
			s = open()
			for p := int32(0); p < 4; p++ {
				checkPartition(t, s, p, want[p])
			}
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}

func rec(k, v string) store.Record { return store.Record{Key: []byte(k), Value: []byte(v)} }
func del(k string) store.Record    { return store.Record{Key: []byte(k)} }

func mustAppend(t *testing.T, s store.Store, p int32, recs ...store.Record) {
	t.Helper()
	if err := s.Append(context.Background(), p, recs); err != nil {
		t.Fatalf("Append(partition %d, %d records): %v", p, len(recs), err)
	}
}

// load returns partition p's contents, failing on duplicate keys or nil
// values (a reported key is live).
func load(t *testing.T, s store.Store, p int32) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := s.Load(context.Background(), p, func(r store.Record) error {
		if _, dup := got[string(r.Key)]; dup {
			return fmt.Errorf("key %q reported twice", r.Key)
		}
		got[string(r.Key)] = string(r.Value)
		return nil
	})
	if err != nil {
		t.Fatalf("Load(partition %d): %v", p, err)
	}
	return got
}

func checkPartition(t *testing.T, s store.Store, p int32, want map[string]string) {
	t.Helper()
	got := load(t, s, p)
	if len(got) != len(want) {
		t.Errorf("partition %d: %d live keys, want %d (got keys %v)", p, len(got), len(want), keys(got, 10))
	}
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("partition %d: key %q missing", p, k)
		case g != v:
			t.Errorf("partition %d: key %q = %.60q, want %.60q", p, k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("partition %d: unexpected key %q", p, k)
		}
	}
}

func keys(m map[string]string, max int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > max {
		out = out[:max]
	}
	return out
}

func testEmptyPartition(t *testing.T, s store.Store) {
	for _, p := range []int32{0, 7, math.MaxInt32} {
		checkPartition(t, s, p, nil)
	}
	if err := s.Append(context.Background(), 3, nil); err != nil {
		t.Fatalf("Append with no records: %v", err)
	}
	checkPartition(t, s, 3, nil)
	// A partition whose every key was deleted is empty again.
	mustAppend(t, s, 4, rec("a", "1"), rec("b", "2"))
	mustAppend(t, s, 4, del("a"), del("b"))
	checkPartition(t, s, 4, nil)
}

func testLatestValueWins(t *testing.T, s store.Store) {
	mustAppend(t, s, 1, rec("k", "v1"), rec("other", "o1"))
	mustAppend(t, s, 1, rec("k", "v2"))
	checkPartition(t, s, 1, map[string]string{"k": "v2", "other": "o1"})
	// Within one Append, records apply in order.
	mustAppend(t, s, 1, rec("k", "v3"), rec("k", "v4"), rec("other", "o2"), rec("other", "o3"))
	checkPartition(t, s, 1, map[string]string{"k": "v4", "other": "o3"})
	// A shorter value replaces a longer one completely, and a longer one
	// a shorter one.
	mustAppend(t, s, 1, rec("k", "x"))
	checkPartition(t, s, 1, map[string]string{"k": "x", "other": "o3"})
	mustAppend(t, s, 1, rec("k", "a value longer than any before"), rec("other", "o4"))
	checkPartition(t, s, 1, map[string]string{"k": "a value longer than any before", "other": "o4"})
}

func testTombstones(t *testing.T, s store.Store) {
	mustAppend(t, s, 2, rec("a", "1"), rec("b", "2"), rec("c", "3"))
	mustAppend(t, s, 2, del("b"))
	checkPartition(t, s, 2, map[string]string{"a": "1", "c": "3"})
	// Deleting a key that never existed is not an error.
	mustAppend(t, s, 2, del("never"))
	// A key set again after its tombstone is live.
	mustAppend(t, s, 2, rec("b", "again"))
	checkPartition(t, s, 2, map[string]string{"a": "1", "b": "again", "c": "3"})
	// Set then delete in one Append: deleted. Delete then set: live.
	mustAppend(t, s, 2, rec("d", "4"), del("d"), del("a"), rec("a", "5"))
	checkPartition(t, s, 2, map[string]string{"a": "5", "b": "again", "c": "3"})
}

func testEmptyKeyAndValue(t *testing.T, s store.Store) {
	// An empty, non-nil value is a live key, not a tombstone.
	mustAppend(t, s, 5, store.Record{Key: []byte("empty"), Value: []byte{}}, rec("", "empty key"))
	got := load(t, s, 5)
	if v, ok := got["empty"]; !ok || v != "" {
		t.Errorf("key with empty value: present=%v value=%q, want present and empty", ok, v)
	}
	if v, ok := got[""]; !ok || v != "empty key" {
		t.Errorf("empty key: present=%v value=%q, want %q", ok, v, "empty key")
	}
	mustAppend(t, s, 5, del("empty"), del(""))
	checkPartition(t, s, 5, nil)
}

func testPartitionsIsolated(t *testing.T, s store.Store) {
	// Partitions at byte boundaries, and keys that look like another
	// partition's prefix, must not leak into each other.
	parts := []int32{0, 1, 255, 256, 65536, math.MaxInt32}
	for _, p := range parts {
		mustAppend(t, s, p, rec("shared", fmt.Sprintf("value of %d", p)), rec(fmt.Sprintf("own-%d", p), "x"))
	}
	mustAppend(t, s, 0, rec("\x00\x00\x00\x01shared", "not partition 1"))
	mustAppend(t, s, 1, del("shared"))
	for _, p := range parts {
		want := map[string]string{fmt.Sprintf("own-%d", p): "x"}
		if p != 1 {
			want["shared"] = fmt.Sprintf("value of %d", p)
		}
		if p == 0 {
			want["\x00\x00\x00\x01shared"] = "not partition 1"
		}
		checkPartition(t, s, p, want)
	}
	checkPartition(t, s, 2, nil)
}

func testInputNotRetained(t *testing.T, s store.Store) {
	key := []byte("key")
	val := []byte("value")
	recs := []store.Record{{Key: key, Value: val}}
	mustAppend(t, s, 6, recs...)
	copy(key, "XXX")
	copy(val, "YYYYY")
	recs[0] = store.Record{Key: []byte("zzz")}
	checkPartition(t, s, 6, map[string]string{"key": "value"})
	// Nor when the value replaces an earlier one of the same key.
	val2 := []byte("value2")
	mustAppend(t, s, 6, store.Record{Key: []byte("key"), Value: val2})
	copy(val2, "ZZZZZZ")
	checkPartition(t, s, 6, map[string]string{"key": "value2"})
}

func testLoadCallbackError(t *testing.T, s store.Store) {
	mustAppend(t, s, 7, rec("a", "1"), rec("b", "2"), rec("c", "3"))
	stop := errors.New("stop here")
	calls := 0
	err := s.Load(context.Background(), 7, func(store.Record) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Load with failing callback returned %v, want the callback's error", err)
	}
	if calls != 1 {
		t.Fatalf("callback called %d times after returning an error, want 1", calls)
	}
	// The store is still usable.
	checkPartition(t, s, 7, map[string]string{"a": "1", "b": "2", "c": "3"})
}

func testLargeValuesAndManyKeys(t *testing.T, s store.Store) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	mustAppend(t, s, 8, store.Record{Key: []byte("big"), Value: big})
	want := map[string]string{"big": string(big)}
	for i := 0; i < 5000; i += 500 {
		recs := make([]store.Record, 0, 500)
		for k := i; k < i+500; k++ {
			key, v := fmt.Sprintf("offset/%06d", k), fmt.Sprintf("%d", k*k)
			recs = append(recs, rec(key, v))
			want[key] = v
		}
		mustAppend(t, s, 8, recs...)
	}
	checkPartition(t, s, 8, want)
}

func testConcurrent(t *testing.T, s store.Store) {
	// 16 writers: pairs share a partition with disjoint keys, and every
	// writer overwrites its own keys, so the final state is known.
	const writers, rounds, keysPer = 16, 40, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := int32(w / 2)
			for r := 0; r < rounds; r++ {
				recs := make([]store.Record, 0, keysPer)
				for k := 0; k < keysPer; k++ {
					key := fmt.Sprintf("w%d-k%d", w, k)
					if k == 0 && r == rounds-1 {
						recs = append(recs, del(key))
						continue
					}
					recs = append(recs, rec(key, fmt.Sprintf("r%d", r)))
				}
				if err := s.Append(context.Background(), p, recs); err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
					return
				}
				if r%10 == 0 { // concurrent loads must not disturb writers
					if err := s.Load(context.Background(), p, func(store.Record) error { return nil }); err != nil {
						errs <- fmt.Errorf("writer %d load: %w", w, err)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for p := int32(0); p < writers/2; p++ {
		want := map[string]string{}
		for _, w := range []int{int(p) * 2, int(p)*2 + 1} {
			for k := 1; k < keysPer; k++ {
				want[fmt.Sprintf("w%d-k%d", w, k)] = fmt.Sprintf("r%d", rounds-1)
			}
		}
		checkPartition(t, s, p, want)
	}
}

func testClose(t *testing.T, s store.Store) {
	mustAppend(t, s, 9, rec("a", "1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Append(context.Background(), 9, []store.Record{rec("b", "2")}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close = %v, want store.ErrClosed", err)
	}
	err := s.Load(context.Background(), 9, func(store.Record) error { return nil })
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("Load after Close = %v, want store.ErrClosed", err)
	}
	if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close = %v, want nil or store.ErrClosed", err)
	}
}
