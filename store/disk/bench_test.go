package disk

// Benchmarks behind the choice of engine and the load-time goal.
//
// BenchmarkAppend compares durable Append throughput of this store (pebble)
// with raw pebble and with bbolt (the engine not chosen; its code lives only
// here), for 1, 16 and 256 concurrent appenders, with sync on and off. One
// append is one small batch like an offset commit: 1-5 records, ~40-byte keys,
// ~30-byte values, on one of 50 partitions.
//
// BenchmarkLoad builds a store of 1,000,000 offset-like and 10,000 group-like
// records once, in a temporary directory, and measures loading it.
//
//	go test -run '^$' -bench 'Append' -benchtime 1000x -count 3 ./store/disk/
//	go test -run '^$' -bench 'Load' -benchtime 5x -count 3 -v ./store/disk/
//
// bbolt-batch uses bbolt's default MaxBatchDelay (10 ms), which is what
// caps it at one appender.

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	bolt "go.etcd.io/bbolt"

	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

const benchPartitions = 50

// appendEngine is what BenchmarkAppend drives.
type appendEngine interface {
	append(p int32, recs []store.Record) error
	close() error
}

type storeEngine struct{ s *Store }

func (e storeEngine) append(p int32, recs []store.Record) error {
	return e.s.Append(context.Background(), p, recs)
}
func (e storeEngine) close() error { return e.s.Close() }

// pebbleEngine is pebble without the Store around it, to show the Store's
// own overhead.
type pebbleEngine struct {
	db *pebble.DB
	wo *pebble.WriteOptions
}

func (e pebbleEngine) append(p int32, recs []store.Record) error {
	b := e.db.NewBatch()
	defer b.Close()
	var key []byte
	for _, r := range recs {
		key = append(partitionKey(key[:0], p), r.Key...)
		if err := b.Set(key, r.Value, nil); err != nil {
			return err
		}
	}
	return e.db.Apply(b, e.wo)
}
func (e pebbleEngine) close() error { return e.db.Close() }

// boltEngine keeps one bucket per partition. batch selects db.Batch (which
// coalesces concurrent calls into one transaction and one fsync) over
// db.Update (one transaction and fsync per call).
type boltEngine struct {
	db    *bolt.DB
	batch bool
}

func (e boltEngine) append(p int32, recs []store.Record) error {
	fn := func(tx *bolt.Tx) error {
		var name [4]byte
		binary.BigEndian.PutUint32(name[:], uint32(p))
		bk, err := tx.CreateBucketIfNotExists(name[:])
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := bk.Put(r.Key, r.Value); err != nil {
				return err
			}
		}
		return nil
	}
	if e.batch {
		return e.db.Batch(fn)
	}
	return e.db.Update(fn)
}
func (e boltEngine) close() error { return e.db.Close() }

func openEngine(b *testing.B, name string, noSync bool) appendEngine {
	dir := b.TempDir()
	switch name {
	case "store", "store-nofill":
		s, err := Open(Options{Dir: dir, NoSync: noSync, Logger: slog.New(slog.DiscardHandler), noWALFill: name == "store-nofill"})
		if err != nil {
			b.Fatal(err)
		}
		return storeEngine{s}
	case "pebble":
		db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, MemTableSize: 32 << 20,
			Logger: pebbleLogger{log: slog.New(slog.DiscardHandler), onFail: func(error) {}}})
		if err != nil {
			b.Fatal(err)
		}
		wo := pebble.Sync
		if noSync {
			wo = pebble.NoSync
		}
		return pebbleEngine{db, wo}
	case "bbolt-update", "bbolt-batch":
		db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		db.NoSync = noSync
		return boltEngine{db: db, batch: name == "bbolt-batch"}
	}
	b.Fatalf("unknown engine %q", name)
	return nil
}

// offsetCommit returns 1-5 records shaped like offset commits of one group.
func offsetCommit(rng *rand.Rand) (int32, []store.Record) {
	n := 1 + rng.Intn(5)
	group, topic := rng.Intn(1000), rng.Intn(20)
	recs := make([]store.Record, n)
	for i := range recs {
		recs[i] = store.Record{
			Key:   fmt.Appendf(nil, "\x00\x01group-%06d/topic-%04d/%06d", group, topic, rng.Intn(64)),
			Value: fmt.Appendf(nil, "\x00\x03%016d%012d", rng.Int63n(1<<40), time.Now().UnixMilli()),
		}
	}
	return int32(group % benchPartitions), recs
}

// runAppends drives b.N appends from `appenders` goroutines and reports
// appends/s, records/s and the p50/p99 latency of one append.
func runAppends(b *testing.B, e appendEngine, appenders int) {
	var next, records atomic.Int64
	lat := make([][]time.Duration, appenders)
	errs := make(chan error, appenders)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < appenders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for next.Add(1) <= int64(b.N) {
				p, recs := offsetCommit(rng)
				start := time.Now()
				if err := e.append(p, recs); err != nil {
					errs <- err
					return
				}
				lat[g] = append(lat[g], time.Since(start))
				records.Add(int64(len(recs)))
			}
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/secs, "appends/s")
	b.ReportMetric(float64(records.Load())/secs, "records/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, appenders := range []int{1, 16, 256} {
			for _, engine := range []string{"store", "store-nofill", "pebble", "bbolt-batch", "bbolt-update"} {
				if engine == "store-nofill" && !sync {
					continue // the fill is for synced stores only
				}
				name := fmt.Sprintf("sync=%v/appenders=%d/engine=%s", sync, appenders, engine)
				b.Run(name, func(b *testing.B) {
					e := openEngine(b, engine, !sync)
					defer e.close()
					runAppends(b, e, appenders)
				})
			}
		}
	}
}

// buildLoadStore fills dir with 1,000,000 offset-like records (~40-byte
// keys, ~30-byte values) and 10,000 group-like records (1-4 KiB values),
// spread over 50 partitions, then compacts it as a long-running store would
// be. It returns the number of records and their key+value bytes.
func buildLoadStore(b *testing.B, dir string) (records int, bytes int64) {
	s, err := Open(Options{Dir: dir, NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	const offsets, groups, batch = 1_000_000, 10_000, 1000
	pending := make([][]store.Record, benchPartitions)
	flush := func(p int) {
		if err := s.Append(ctx, int32(p), pending[p]); err != nil {
			b.Fatal(err)
		}
		pending[p] = pending[p][:0]
	}
	add := func(p int, r store.Record) {
		pending[p] = append(pending[p], r)
		records++
		bytes += int64(len(r.Key) + len(r.Value))
		if len(pending[p]) == batch {
			flush(p)
		}
	}
	for i := 0; i < offsets; i++ {
		g := i / 100 // 10,000 groups with 100 offsets each
		add(g%benchPartitions, store.Record{
			Key:   fmt.Appendf(nil, "\x00\x01group-%06d/topic-%04d/%06d", g, i%7, i%100),
			Value: fmt.Appendf(nil, "\x00\x03%016d%012d", rng.Int63n(1<<40), int64(1_700_000_000_000)+int64(i)),
		})
	}
	for g := 0; g < groups; g++ {
		v := make([]byte, 1024+rng.Intn(3*1024))
		rng.Read(v)
		add(g%benchPartitions, store.Record{Key: fmt.Appendf(nil, "\x00\x02group-%06d", g), Value: v})
	}
	for p := range pending {
		if len(pending[p]) > 0 {
			flush(p)
		}
	}
	if err := s.Compact(ctx); err != nil {
		b.Fatal(err)
	}
	return records, bytes
}

func loadPartition(b *testing.B, s *Store, p int32) (n int) {
	err := s.Load(context.Background(), p, func(r store.Record) error {
		n++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func BenchmarkLoad(b *testing.B) {
	dir, err := os.MkdirTemp("", "cohort-load-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	total, rawBytes := buildLoadStore(b, dir)
	b.Logf("built %d records (%d MiB of keys+values) in %v", total, rawBytes>>20, time.Since(start).Round(time.Millisecond))

	open := func(b *testing.B) *Store {
		s, err := Open(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	loadAll := func(b *testing.B, s *Store, parallel bool) {
		var n atomic.Int64
		var wg sync.WaitGroup
		for p := int32(0); p < benchPartitions; p++ {
			if !parallel {
				n.Add(int64(loadPartition(b, s, p)))
				continue
			}
			wg.Add(1)
			go func(p int32) {
				defer wg.Done()
				n.Add(int64(loadPartition(b, s, p)))
			}(p)
		}
		wg.Wait()
		if int(n.Load()) != total {
			b.Fatalf("loaded %d records, want %d", n.Load(), total)
		}
	}
	for _, mode := range []string{"sequential", "parallel"} {
		// Each iteration opens the store afresh (empty block cache), as a
		// starting coordinator does, loads all 50 partitions and closes.
		b.Run("open+all-50/"+mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s := open(b)
				loadAll(b, s, mode == "parallel")
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	// The same after a crash that left the record log's tail unfolded: a
	// copy of the directory taken with foldAtMax bytes of 50-offset commits
	// (overwriting existing offsets) in the log, the most a fold lets pile up
	// before it starts. Load replays it over the folded keys.
	tailDir := crashImageWithTail(b, dir)
	defer os.RemoveAll(tailDir)
	b.Run("open+all-50/parallel/log-tail", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer() // a fresh copy: Open folds the tail it finds
			run := copyFiles(b, tailDir)
			b.StartTimer()
			s, err := Open(Options{Dir: run, Logger: slog.New(slog.DiscardHandler), foldAt: math.MaxInt})
			if err != nil {
				b.Fatal(err)
			}
			loadAll(b, s, true)
			// Abandon without Close, as a crash would.
			_ = s.db.Close()
			_ = s.lock.Close()
			b.StopTimer()
			os.RemoveAll(run)
			b.StartTimer()
		}
		b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("one-partition", func(b *testing.B) {
		s := open(b)
		defer s.Close()
		want := loadPartition(b, s, 7)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if n := loadPartition(b, s, 7); n != want {
				b.Fatalf("loaded %d records, want %d", n, want)
			}
		}
		b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWALSync measures what one WAL write of a group-commit round
// (3,000 bytes) followed by fdatasync costs, in wall and CPU time, in a
// file that grows (a fresh WAL), in one preallocated with fallocate's
// KEEP_SIZE (what pebble does), and in one whose blocks were written and
// synced before (a recycled WAL, or one filled ahead by walFillFS).
func BenchmarkWALSync(b *testing.B) {
	for _, mode := range []string{"grow", "fallocate", "filled"} {
		b.Run("file="+mode, func(b *testing.B) {
			f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "000001.log"), vfs.WriteCategoryUnspecified)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			size := int64(b.N+1) * 3000
			switch mode {
			case "fallocate":
				if err := f.Preallocate(0, size); err != nil {
					b.Skip("fallocate:", err)
				}
			case "filled":
				z := make([]byte, 1<<20)
				for off := int64(0); off < size; off += int64(len(z)) {
					if _, err := f.WriteAt(z, off); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.SyncData(); err != nil {
					b.Fatal(err)
				}
			}
			p := make([]byte, 3000)
			b.ResetTimer()
			cpu := cpuTime(b)
			for i := 0; i < b.N; i++ {
				if _, err := f.WriteAt(p, int64(i)*3000); err != nil {
					b.Fatal(err)
				}
				if err := f.SyncData(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkSyncParallelFiles asks whether several logs, each syncing on its
// own, would overlap their syncs on this disk (the question behind sharding
// the store over several WALs, docs/architecture.md): each of `files`
// goroutines writes 3,000 bytes into its own filled-ahead file and syncs
// it, b.N times in all. syncs/s is the rate of the whole; if the disk
// overlapped concurrent syncs it would grow with the files, if it serialises
// them it stays flat and each sync's wall time grows with the files.
func BenchmarkSyncParallelFiles(b *testing.B) {
	for _, files := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			dir := b.TempDir()
			per := b.N/files + 1
			fs := make([]vfs.File, files)
			for i := range fs {
				f, err := vfs.Default.Create(filepath.Join(dir, fmt.Sprintf("%06d.log", i+1)), vfs.WriteCategoryUnspecified)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				z := make([]byte, 1<<20)
				for off := int64(0); off < int64(per+1)*3000; off += int64(len(z)) {
					if _, err := f.WriteAt(z, off); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.SyncData(); err != nil {
					b.Fatal(err)
				}
				fs[i] = f
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, files)
			for i, f := range fs {
				n := b.N / files
				if i < b.N%files {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := make([]byte, 3000)
					for j := 0; j < n; j++ {
						if _, err := f.WriteAt(p, int64(j)*3000); err != nil {
							errs <- err
							return
						}
						if err := f.SyncData(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "syncs/s")
		})
	}
}

// BenchmarkWALFillStep measures one step of walFillFS (zeros written and
// synced at the end of the file), the stall the WAL writer sees once per
// step.
func BenchmarkWALFillStep(b *testing.B) {
	for _, step := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("step=%dKiB", step>>10), func(b *testing.B) {
			f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "000001.log"), vfs.WriteCategoryUnspecified)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			z := make([]byte, step)
			for i := 0; i < b.N; i++ {
				if _, err := f.WriteAt(z, int64(i)*int64(step)); err != nil {
					b.Fatal(err)
				}
				if err := f.SyncData(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendWide measures what a durable commit of many partitions
// costs the store: each appender is one consumer group committing all 50
// partitions of its topic at once, again and again (the same keys
// overwritten), as franz-go and Kafka's Java consumer do. Engines: `store`
// (this store: one record log entry per Append, folded in the background),
// `pebble` (raw pebble with one key per offset: the store's layout before
// the record log, in the same run) and `memstore` (the in-memory store,
// no disk: the floor). cpu-µs/op is the process's CPU per Append, the
// figure the record log is about.
//
//	go test -run '^$' -bench 'AppendWide' -benchtime 3s -count 3 ./store/disk/
func BenchmarkAppendWide(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, appenders := range []int{16, 64} {
			for _, engine := range []string{"store", "pebble", "memstore"} {
				if engine == "memstore" && sync {
					continue
				}
				b.Run(fmt.Sprintf("sync=%v/appenders=%d/engine=%s", sync, appenders, engine), func(b *testing.B) {
					var e appendEngine
					if engine == "memstore" {
						e = memEngine{memstore.New()}
					} else {
						e = openEngine(b, engine, !sync)
					}
					defer e.close()
					runWide(b, e, appenders, 50)
				})
			}
		}
	}
}

type memEngine struct{ s *memstore.Store }

func (e memEngine) append(p int32, recs []store.Record) error {
	return e.s.Append(context.Background(), p, recs)
}
func (e memEngine) close() error { return e.s.Close() }

// runWide drives b.N appends of `width` records (one group's commit of
// `width` partitions) from `appenders` goroutines, each its own group, and
// reports appends/s, offsets/s and CPU per append.
func runWide(b *testing.B, e appendEngine, appenders, width int) {
	var next atomic.Int64
	errs := make(chan error, appenders)
	var wg sync.WaitGroup
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for g := 0; g < appenders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			recs := make([]store.Record, width)
			keys := make([][]byte, width)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "\x00\x01group-%06d/topic-0001/%06d", g, i)
			}
			value := make([]byte, 0, 32)
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				for i := range recs {
					value = fmt.Appendf(value[:0], "\x00\x03%016d%012d", n, 1_700_000_000_000+n)
					recs[i] = store.Record{Key: keys[i], Value: value}
				}
				if err := e.append(int32(g%benchPartitions), recs); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/secs, "appends/s")
	b.ReportMetric(float64(b.N*width)/secs, "offsets/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// crashImageWithTail copies dir after appending foldAtMax bytes of record
// log (50-offset commits over existing offset keys, synced, not folded) and
// returns the copy: what a crash just before a fold leaves.
func crashImageWithTail(b *testing.B, dir string) string {
	s, err := Open(Options{Dir: dir, Logger: slog.New(slog.DiscardHandler), foldAt: math.MaxInt})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for n, logged := 0, 0; logged < foldAtMax; n++ {
		g := n % 10_000
		recs := make([]store.Record, 50)
		for i := range recs {
			j := g*100 + i
			recs[i] = store.Record{
				Key:   fmt.Appendf(nil, "\x00\x01group-%06d/topic-%04d/%06d", g, j%7, j%100),
				Value: fmt.Appendf(nil, "\x00\x03%016d%012d", n, int64(1_700_000_000_000)+int64(j)),
			}
		}
		if err := s.Append(ctx, int32(g%benchPartitions), recs); err != nil {
			b.Fatal(err)
		}
		s.seqMu.Lock()
		logged = s.pending
		s.seqMu.Unlock()
	}
	cp := copyFiles(b, dir)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return cp
}

// copyFiles copies the files of dir but LOCK into a new temporary directory.
func copyFiles(b *testing.B, dir string) string {
	cp, err := os.MkdirTemp("", "cohort-load-tail-")
	if err != nil {
		b.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, e.Name()), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return cp
}

// BenchmarkFold measures one fold of a full threshold (foldAtMax bytes) of
// 50-offset commits: groups=64 is steady overwrite (the same 64 groups
// commit the same 50 partitions again and again, as the end-to-end commit
// benchmark does), groups=10000 touches ~270k distinct keys. Each iteration
// appends the log with the timer stopped (NoSync, folding off), then times
// the fold alone; it reports the fold's CPU per logged record and the bytes
// it allocates per logged record.
func BenchmarkFold(b *testing.B) {
	for _, groups := range []int{64, 10_000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), NoSync: true, Logger: slog.New(slog.DiscardHandler), foldAt: math.MaxInt})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			recs := make([]store.Record, 50)
			var cpu time.Duration
			var mem0, mem1 runtime.MemStats
			var allocated uint64
			records := 0
			n := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for logged := 0; logged < foldAtMax; n++ {
					g := n % groups
					for i := range recs {
						recs[i] = store.Record{
							Key:   fmt.Appendf(recs[i].Key[:0], "\x00\x01group-%06d/topic-0001/%06d", g, i),
							Value: fmt.Appendf(recs[i].Value[:0], "\x00\x03%016d%012d", n, int64(1_700_000_000_000)+int64(n)),
						}
					}
					if err := s.Append(ctx, int32(g%benchPartitions), recs); err != nil {
						b.Fatal(err)
					}
					records += len(recs)
					s.seqMu.Lock()
					logged = s.pending
					s.seqMu.Unlock()
				}
				runtime.ReadMemStats(&mem0)
				cpu0 := cpuTime(b)
				b.StartTimer()
				if err := s.fold(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime(b) - cpu0
				runtime.ReadMemStats(&mem1)
				allocated += mem1.TotalAlloc - mem0.TotalAlloc
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(records), "cpu-ns/record")
			b.ReportMetric(float64(allocated)/float64(records), "B/record")
		})
	}
}
