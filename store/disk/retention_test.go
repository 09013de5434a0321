package disk

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/cohort-dev/cohort/store"
)

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if os.IsNotExist(err) {
			return nil // removed by a compaction meanwhile
		}
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetentionBoundsDiskSize runs a steady workload of overwrites and
// deletes (every round rewrites every live key, deletes a fifth of them and
// creates as many new ones, so the live data stays constant while the
// history grows without end) and checks that the directory stays within a
// small multiple of the live data, far below the history written. It runs
// once leaving compaction to the engine and once calling Compact now and
// then.
func TestRetentionBoundsDiskSize(t *testing.T) {
	for _, nudge := range []bool{false, true} {
		t.Run(fmt.Sprintf("Compact=%v", nudge), func(t *testing.T) {
			dir := t.TempDir()
			// NoSync: durability is not under test here, disk usage is.
			s := openT(t, Options{Dir: dir, NoSync: true, memTableSize: 256 << 10})
			defer s.Close()
			ctx := context.Background()
			rng := rand.New(rand.NewSource(1))
			const partitions, liveKeys, rounds = 6, 500, 40
			next := make([]int, partitions) // next new key id per partition
			live := make([][]int, partitions)
			for p := range live {
				for k := 0; k < liveKeys; k++ {
					live[p] = append(live[p], next[p])
					next[p]++
				}
			}
			value := func() []byte {
				v := make([]byte, 100)
				for i := range v {
					v[i] = "0123456789abcdef"[rng.Intn(16)]
				}
				return v
			}
			var written int64
			liveBytes := int64(partitions * liveKeys * (100 + 20))
			maxSize := int64(0)
			for r := 0; r < rounds; r++ {
				for p := 0; p < partitions; p++ {
					var recs []store.Record
					for i, k := range live[p] {
						key := fmt.Appendf(nil, "group-%08d/offset", k)
						if i%5 == r%5 { // delete, and replace by a new key
							recs = append(recs, store.Record{Key: key})
							live[p][i] = next[p]
							next[p]++
							key = fmt.Appendf(nil, "group-%08d/offset", live[p][i])
						}
						recs = append(recs, store.Record{Key: key, Value: value()})
						written += int64(len(key) + 100)
						if len(recs) >= 100 {
							if err := s.Append(ctx, int32(p), recs); err != nil {
								t.Fatal(err)
							}
							recs = recs[:0]
						}
					}
					if err := s.Append(ctx, int32(p), recs); err != nil {
						t.Fatal(err)
					}
				}
				if nudge && r%10 == 9 {
					if err := s.Compact(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if size := dirSize(t, dir); size > maxSize {
					maxSize = size
				}
			}
			// The live data is still all there.
			for p := 0; p < partitions; p++ {
				n := 0
				if err := s.Load(ctx, int32(p), func(store.Record) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if n != liveKeys {
					t.Fatalf("partition %d has %d live keys, want %d", p, n, liveKeys)
				}
			}
			// Bound: the live data several times over plus room for the
			// memtable's WAL and a few unflushed tables. Keeping the history
			// would need `written` bytes (before compression).
			bound := 4*liveBytes + 4<<20
			t.Logf("live %d KiB, written %d KiB, largest directory %d KiB, final %d KiB, bound %d KiB",
				liveBytes>>10, written>>10, maxSize>>10, dirSize(t, dir)>>10, bound>>10)
			if bound >= written/2 {
				t.Fatalf("test too small: the bound %d does not separate from the history %d", bound, written)
			}
			if maxSize > bound {
				t.Fatalf("directory grew to %d bytes, bound %d (history written %d): old values and tombstones are not dropped",
					maxSize, bound, written)
			}
		})
	}
}
