package disk

import (
	"context"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cohort-dev/cohort/store"
)

// crashPhase runs writers (ids from firstID, partitions id%5) against s
// until threshold acknowledgements, then takes a crash image of fs
// (unsyncedPercent of the unsynced data kept) and stops them. It returns the
// image, the writers and how many of each writer's ops were acknowledged
// before the image was taken: everything acknowledged by then was synced
// before the image, so it must be in the image.
func crashPhase(t *testing.T, s *Store, fs *vfs.MemFS, rng *rand.Rand, firstID, writers int, threshold int64, pipelined bool, unsyncedPercent int) (*vfs.MemFS, []*crashWriter, []int) {
	t.Helper()
	var acks atomic.Int64
	crash := make(chan struct{})
	var once sync.Once
	onAck := func() {
		if acks.Add(1) >= threshold {
			once.Do(func() { close(crash) })
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws := make([]*crashWriter, writers)
	var wg sync.WaitGroup
	for i := range ws {
		id := firstID + i
		ws[i] = &crashWriter{id: id, p: int32(id % 5), pipelined: pipelined}
		wg.Add(1)
		go func(w *crashWriter, seed int64) {
			defer wg.Done()
			w.run(ctx, s, rand.New(rand.NewSource(seed)), onAck)
		}(ws[i], rng.Int63())
	}
	<-crash
	minAcked := make([]int, writers)
	for i, w := range ws {
		w.mu.Lock()
		minAcked[i] = w.acked
		w.mu.Unlock()
	}
	image := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPercent, RNG: randv2.New(randv2.NewPCG(uint64(rng.Int63()), 2))})
	cancel()
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return image, ws, minAcked
}

// loadWriters reads every writer key of partitions 0..4 of s: writer id →
// key index → sequence number of its value.
func loadWriters(t *testing.T, s *Store) map[int]map[int]int {
	t.Helper()
	got := map[int]map[int]int{}
	for p := int32(0); p < 5; p++ {
		err := s.Load(context.Background(), p, func(rec store.Record) error {
			var w, k int
			if _, err := fmt.Sscanf(string(rec.Key), "w%d-k%d", &w, &k); err != nil || int32(w%5) != p {
				return fmt.Errorf("unexpected key %q in partition %d", rec.Key, p)
			}
			seq := crashParse(w, string(rec.Value))
			if seq < 1 {
				return fmt.Errorf("key %q: garbage value %q", rec.Key, rec.Value)
			}
			if got[w] == nil {
				got[w] = map[int]int{}
			}
			got[w][k] = seq
			return nil
		})
		if err != nil {
			t.Fatalf("Load(%d): %v", p, err)
		}
	}
	return got
}

// TestCrashAfterRecovery crashes a store, reopens the crash image (Open
// folds the record log the crash left, unsynced, and the log's sequence
// numbers start again from what is left of it), writes on with other
// writers and crashes it again: what survived the first crash must survive
// the second unchanged, and the second writers' acknowledged appends too.
func TestCrashAfterRecovery(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	const writers = 6
	for i := 0; i < rounds; i++ {
		seed := int64(5000 + i)
		rng := rand.New(rand.NewSource(seed))
		unsynced := 0
		if i%2 == 1 {
			unsynced = 50
		}
		pipelined := i%4 >= 2
		const dir = "/store"
		mem := vfs.NewCrashableMem()
		opts := Options{Dir: dir, fs: mem, memTableSize: 64 << 10, foldAt: 2 << 10}
		s := openT(t, opts)
		image1, ws1, acked1 := crashPhase(t, s, mem, rng, 0, writers, int64(20+rng.Intn(600)), pipelined, unsynced)

		opts.fs = image1
		s = openT(t, opts)
		after1 := loadWriters(t, s)
		for i, w := range ws1 {
			if err := w.check(acked1[i], orEmpty(after1[w.id])); err != nil {
				t.Fatalf("seed %d, first crash: %v", seed, err)
			}
		}
		image2, ws2, acked2 := crashPhase(t, s, image1, rng, writers, writers, int64(20+rng.Intn(600)), pipelined, unsynced)

		opts.fs = image2
		s = openT(t, opts)
		after2 := loadWriters(t, s)
		s.Close()
		for _, w := range ws1 {
			if fmt.Sprint(orEmpty(after2[w.id])) != fmt.Sprint(orEmpty(after1[w.id])) {
				t.Errorf("seed %d: writer %d had %v after the first crash, %v after the second", seed, w.id, after1[w.id], after2[w.id])
			}
		}
		for i, w := range ws2 {
			if err := w.check(acked2[i], orEmpty(after2[w.id])); err != nil {
				t.Errorf("seed %d, second crash: %v", seed, err)
			}
		}
	}
}

func orEmpty(m map[int]int) map[int]int {
	if m == nil {
		return map[int]int{}
	}
	return m
}
