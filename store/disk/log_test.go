package disk

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cohort-dev/cohort/store"
)

// logBytes is the size of the record log entries not yet folded.
func logBytes(t *testing.T, s *Store) (n int64, entries int) {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logPrefix, UpperBound: logEnd})
	if err != nil {
		t.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		n += int64(len(it.Value()))
		entries++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n, entries
}

// loadState loads partitions ps of s.
func loadState(t *testing.T, s *Store, ps []int32) state {
	t.Helper()
	got := state{}
	for _, p := range ps {
		got[p] = map[string]string{}
		err := s.Load(context.Background(), p, func(r store.Record) error {
			if _, dup := got[p][string(r.Key)]; dup {
				return fmt.Errorf("key %q reported twice", r.Key)
			}
			got[p][string(r.Key)] = string(r.Value)
			return nil
		})
		if err != nil {
			t.Fatalf("Load(%d): %v", p, err)
		}
	}
	return got
}

// TestRecordLogMatchesModel drives the store with random sets, deletes and
// empty values on several partitions (the catalog's -1 among them), through
// Append, AppendMulti and StartMulti, with a fold threshold so small that
// folds run all the time in the background, and compares every Load with a
// model: while running (Load lays the log tail over the folded keys), after
// opening a crash image (Open folds the tail it finds) and after Close (which
// folds everything).
func TestRecordLogMatchesModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// Synced: the copy below must see every acknowledged Append.
	s := openT(t, Options{Dir: dir, foldAt: 2 << 10})
	parts := []int32{-1, 0, 1, 2, 7}
	model := state{}
	for _, p := range parts {
		model[p] = map[string]string{}
	}
	rng := rand.New(rand.NewSource(3))
	records := func(p int32) []store.Record {
		var recs []store.Record
		for i := rng.Intn(12); i >= 0; i-- {
			k := fmt.Sprintf("k%03d", rng.Intn(60))
			switch rng.Intn(6) {
			case 0:
				recs = append(recs, store.Record{Key: []byte(k)})
				delete(model[p], k)
			case 1:
				recs = append(recs, store.Record{Key: []byte(k), Value: []byte{}})
				model[p][k] = ""
			default:
				v := fmt.Sprintf("v%d-%s", rng.Intn(1000), k)
				recs = append(recs, rec(k, v))
				model[p][k] = v
			}
		}
		return recs
	}
	for round := 0; round < 600; round++ {
		var batches []store.PartitionRecords
		for i := rng.Intn(3); i >= 0; i-- {
			p := parts[rng.Intn(len(parts))]
			batches = append(batches, store.PartitionRecords{Partition: p, Records: records(p)})
		}
		var err error
		switch round % 3 {
		case 0:
			err = s.Append(ctx, batches[0].Partition, batches[0].Records)
			for _, b := range batches[1:] {
				if err == nil {
					err = s.Append(ctx, b.Partition, b.Records)
				}
			}
		case 1:
			err = s.AppendMulti(ctx, batches)
		default:
			var wait func() error
			if wait, err = s.StartMulti(ctx, batches); err == nil {
				err = wait()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if round%50 == 49 {
			if got := loadState(t, s, parts); !got.equal(model) {
				t.Fatalf("round %d: Load differs from the model:\n got %v\nwant %v", round, got, model)
			}
		}
	}
	// Leave a tail: no more folds, one more round of every partition.
	s.seqMu.Lock()
	s.foldAt = 1 << 30
	done := s.foldDone
	s.seqMu.Unlock()
	if done != nil {
		<-done
	}
	for _, p := range parts {
		if err := s.Append(ctx, p, records(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, entries := logBytes(t, s); entries < len(parts) {
		t.Fatalf("the log holds %d entries before Close, want at least %d", entries, len(parts))
	}
	// Reopen on a copy taken while the store is open (a crash image: the
	// tail not folded), then close the original (which folds everything).
	crashed := copyDir(t, dir)
	r := openT(t, Options{Dir: crashed})
	if n, entries := logBytes(t, r); entries != 0 {
		t.Fatalf("after opening the crash image the log holds %d entries (%d bytes): Open does not fold", entries, n)
	}
	if got := loadState(t, r, parts); !got.equal(model) {
		t.Fatalf("after a crash: Load differs from the model:\n got %v\nwant %v", got, model)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, Options{Dir: dir})
	defer s.Close()
	if n, entries := logBytes(t, s); entries != 0 {
		t.Fatalf("after Close the log still holds %d entries (%d bytes): Close does not fold", entries, n)
	}
	if got := loadState(t, s, parts); !got.equal(model) {
		t.Fatalf("after reopening: Load differs from the model:\n got %v\nwant %v", got, model)
	}
}

// TestRecordLogStaysBounded overwrites the same keys from concurrent
// appenders (the shape of consumers committing their partitions again and
// again) and checks that the log's unfolded tail never holds more than a few
// fold thresholds, however far the appenders run ahead of the background
// fold, and that what it folded away is the history, not the data.
func TestRecordLogStaysBounded(t *testing.T) {
	ctx := context.Background()
	const foldAt = 32 << 10
	s := openT(t, Options{Dir: t.TempDir(), NoSync: true, foldAt: foldAt})
	defer s.Close()
	const appenders, rounds, partitions = 8, 400, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var written, worst int64
	errc := make(chan error, appenders)
	for a := 0; a < appenders; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				recs := make([]store.Record, 50)
				for i := range recs {
					recs[i] = rec(fmt.Sprintf("group-%d/topic/%03d", a, i), fmt.Sprintf("offset %d", r))
				}
				if err := s.Append(ctx, int32(a%partitions), recs); err != nil {
					errc <- err
					return
				}
				if r%20 == 0 {
					n, _ := logBytes(t, s)
					mu.Lock()
					written += 20 * 50 * 30
					worst = max(worst, n)
					mu.Unlock()
				}
			}
		}(a)
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Bound: a fold under way (at most what the appenders may add before
	// they wait, 4×foldAt plus one entry each) and as much again behind it.
	bound := int64(2 * (4*foldAt + appenders*3000))
	t.Logf("history written ≈ %d KiB, largest log tail %d KiB, bound %d KiB", written>>10, worst>>10, bound>>10)
	if worst > bound {
		t.Fatalf("the log tail grew to %d bytes, bound %d", worst, bound)
	}
	if written < 4*bound {
		t.Fatalf("test too small: history %d does not separate from the bound %d", written, bound)
	}
	got := loadState(t, s, []int32{0, 1, 2, 3})
	for a := 0; a < appenders; a++ {
		for i := 0; i < 50; i++ {
			k := fmt.Sprintf("group-%d/topic/%03d", a, i)
			if v := got[int32(a%partitions)][k]; v != fmt.Sprintf("offset %d", rounds-1) {
				t.Fatalf("%s = %q, want the last offset %d", k, v, rounds-1)
			}
		}
	}
}

// TestLogPartitionReserved checks that the partition holding the record log
// cannot be written or read as a partition.
func TestLogPartitionReserved(t *testing.T) {
	s := openT(t, Options{Dir: t.TempDir()})
	defer s.Close()
	ctx := context.Background()
	if err := s.Append(ctx, logPartition, []store.Record{rec("k", "v")}); !errors.Is(err, errLogPartition) {
		t.Fatalf("Append to the log's partition = %v, want errLogPartition", err)
	}
	if err := s.Load(ctx, logPartition, func(store.Record) error { return nil }); !errors.Is(err, errLogPartition) {
		t.Fatalf("Load of the log's partition = %v, want errLogPartition", err)
	}
	if err := s.Append(ctx, logPartition+1, []store.Record{rec("k", "v")}); err != nil {
		t.Fatalf("Append to the partition next to the log's: %v", err)
	}
}

// TestFormat1Upgraded opens a store whose marker says format 1 (written
// before the record log: the same key layout without log entries) and
// checks that it opens with its data and that its marker now says format 2,
// which an older cohort refuses instead of ignoring the log.
func TestFormat1Upgraded(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, Options{Dir: dir})
	if err := s.Append(context.Background(), 3, []store.Record{rec("k", "v")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // folds: the key is in partition 3's range, as format 1 kept it
		t.Fatal(err)
	}
	marker := filepath.Join(dir, markerName)
	if err := os.WriteFile(marker, []byte(markerFormat1), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openT(t, Options{Dir: dir})
	defer s.Close()
	if got := loadState(t, s, []int32{3}); got[3]["k"] != "v" || len(got[3]) != 1 {
		t.Fatalf("format 1 store loaded %v, want k=v", got[3])
	}
	content, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if string(content) != markerContent {
		t.Fatalf("marker after Open = %q, want %q", content, markerContent)
	}
}

// TestShared checks the word-at-a-time common prefix against a byte loop on
// every split of a few keys.
func TestShared(t *testing.T) {
	slow := func(a, b []byte) int {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		return i
	}
	base := []byte("offset/some-consumer-group/a-topic-name/\x00\x00\x00\x07tail")
	for n := 0; n <= len(base); n++ {
		for d := 0; d <= n; d++ {
			a := slices.Clone(base[:n])
			b := slices.Clone(base)
			if d < n {
				b[d] ^= 0x10
			}
			for _, pair := range [][2][]byte{{a, b}, {b, a}, {a, a}, {nil, a}} {
				if got, want := shared(pair[0], pair[1]), slow(pair[0], pair[1]); got != want {
					t.Fatalf("shared(%q, %q) = %d, want %d", pair[0], pair[1], got, want)
				}
			}
		}
	}
}

// TestAppendEntryRoundTrip encodes random batches (sections whose lengths
// need one to three bytes of prefix, empty batches, tombstones, empty
// values) after a prefix that must survive, and decodes them back.
func TestAppendEntryRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	type rec struct {
		p   int32
		key string
		val []byte
	}
	for iter := range 200 {
		var batches []store.PartitionRecords
		var want []rec
		for range rng.Intn(4) + 1 {
			pr := store.PartitionRecords{Partition: int32(rng.Intn(100)) - 1}
			n := []int{0, 1, 3, 40, 400}[rng.Intn(5)]
			for i := range n {
				key := fmt.Sprintf("group-%d/topic/%d", rng.Intn(3), i)
				var val []byte
				switch rng.Intn(4) {
				case 0: // tombstone
				case 1:
					val = []byte{}
				default:
					val = make([]byte, rng.Intn(200))
					rng.Read(val)
				}
				pr.Records = append(pr.Records, store.Record{Key: []byte(key), Value: val})
				want = append(want, rec{pr.Partition, key, val})
			}
			batches = append(batches, pr)
		}
		prefix := []byte("kept")
		enc, err := appendEntry(slices.Clone(prefix), batches)
		if err != nil {
			t.Fatal(err)
		}
		if string(enc[:len(prefix)]) != string(prefix) {
			t.Fatalf("iteration %d: the prefix was overwritten", iter)
		}
		var got []rec
		err = decodeEntry(enc[len(prefix):], logPartition, func(p int32, r store.Record) {
			got = append(got, rec{p, string(r.Key), slices.Clone(r.Value)})
		})
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if len(got) != len(want) {
			t.Fatalf("iteration %d: %d records decoded, want %d", iter, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.p != w.p || g.key != w.key || (g.val == nil) != (w.val == nil) || string(g.val) != string(w.val) {
				t.Fatalf("iteration %d, record %d: got %+v, want %+v", iter, i, g, w)
			}
		}
	}
	if _, err := appendEntry(nil, []store.PartitionRecords{{Partition: logPartition, Records: []store.Record{{Key: []byte("k")}}}}); !errors.Is(err, errLogPartition) {
		t.Fatalf("the log's partition: %v", err)
	}
}
