package coordinator

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/disk"
)

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingStore counts the records its Load hands out. Each Load counts
// on its own and adds its count once: one counter shared by the partitions
// loading in parallel cost 6% of a load's CPU (the cores passing its cache
// line back and forth).
type countingStore struct {
	store.Store
	n atomic.Int64
}

func (s *countingStore) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	var n int64
	defer func() { s.n.Add(n) }()
	return s.Store.Load(ctx, p, func(r store.Record) error {
		n++
		return fn(r)
	})
}

// TestLoadAfterRestart measures the load after a restart at the issue's
// size: COHORT_BENCH_LOAD_GROUPS groups (100,000; 3 members each, ~1.3 KB
// of metadata and assignments) with 100 committed offsets each (10M), built
// by the real state machine into the embedded disk store in a temporary
// directory (removed at the end), then COHORT_BENCH_REPEAT (3) coordinator
// starts on it, each timed until every partition has loaded: records
// replayed per second of wall time and of process CPU time (on a machine
// shared with other jobs the second is the steadier). During each load, as soon as the first partition
// has loaded and while others still load, an OffsetFetch for one of its
// groups must be answered with the group's offset (a loaded partition
// serves while the rest load). COHORT_BENCH_LOAD_PROFILE=file writes a CPU
// profile of the loads only; COHORT_BENCH_LOAD_HEAP=file a heap profile
// after the last load (what the loaded state holds). Only with COHORT_BENCH=1.
func TestLoadAfterRestart(t *testing.T) {
	if testing.Short() || os.Getenv("COHORT_BENCH") != "1" {
		t.Skip("COHORT_BENCH=1 runs the load-after-restart benchmark")
	}
	groups, repeat := 100_000, 3
	for name, v := range map[string]*int{"COHORT_BENCH_LOAD_GROUPS": &groups, "COHORT_BENCH_REPEAT": &repeat} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q", name, s)
			}
			*v = n
		}
	}
	const perGroup, partitions = 100, 50
	dir := t.TempDir()
	start := time.Now()
	written := buildLargeState(t, dir, groups, perGroup, partitions)
	var bytes int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	t.Logf("built %d groups, %d offsets (%d records written, %.0f MiB on disk) in %v",
		groups, groups*perGroup, written, float64(bytes)/(1<<20), time.Since(start).Round(time.Millisecond))

	st, err := disk.Open(disk.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs := &countingStore{Store: st}
	if path := os.Getenv("COHORT_BENCH_LOAD_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	t.Logf("fresh memory on this machine: %.1f µs of CPU per 4 KiB page first touched (%d MiB mapped and written)", freshPageCost(t, 256<<20).Seconds()*1e6, 256)
	for rep := range repeat {
		cs.n.Store(0)
		// Each load starts as a restarted process would: no garbage of
		// the build or of the previous load to collect, and no freed heap
		// pages to reuse (a fresh process faults in every page it uses).
		runtime.GC()
		debug.FreeOSMemory()
		c, err := New(Config{Partitions: partitions, Group: group.Defaults(), Store: cs})
		if err != nil {
			t.Fatal(err)
		}
		cases := make([]reflect.SelectCase, len(c.parts))
		for i, p := range c.parts {
			cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.loaded)}
		}
		cpu0 := processCPU()
		t0 := time.Now()
		c.Start()
		first, _, _ := reflect.Select(cases)
		firstAt := time.Since(t0)
		// A group of the first partition loaded, answered while others load.
		gi := 0
		for ; gi < groups && PartitionFor(fmt.Sprintf("group-%05d", gi), partitions) != int32(first); gi++ {
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group = 7, fmt.Sprintf("group-%05d", gi)
		f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "topic-0", Partitions: []int32{3}}}
		resp, err := c.Handle(ctx, group.Client{ID: "load-check"}, f)
		answeredAt := time.Since(t0)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		stillLoading := 0
		for _, p := range c.parts {
			select {
			case <-p.loaded:
			default:
				stillLoading++
			}
		}
		fr := resp.(*kmsg.OffsetFetchResponse)
		if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != int64(gi*1000+3) {
			t.Fatalf("OffsetFetch of %s on the first loaded partition: %+v", f.Group, fr)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		err = c.WaitLoaded(ctx)
		took := time.Since(t0)
		cpu := processCPU() - cpu0
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		n := cs.n.Load()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if path := os.Getenv("COHORT_BENCH_LOAD_HEAP"); path != "" && rep == repeat-1 {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
		var gs, offs int
		for _, p := range c.parts {
			gs += p.shardForTest().Len()
			for _, id := range p.shardForTest().GroupIDs() {
				offs += p.shardForTest().Group(id).NumOffsets()
			}
		}
		c.Close()
		if gs != groups || offs != groups*perGroup {
			t.Fatalf("loaded %d groups, %d offsets; want %d, %d", gs, offs, groups, groups*perGroup)
		}
		t.Logf("load %d: %d records in %v = %.2fM records/s (%.2fM offsets/s); process CPU %v (%.2fM records per CPU second); live heap %d MiB; first partition (%d) loaded at %v, its group answered at %v with %d partitions still loading",
			rep, n, took.Round(time.Millisecond), float64(n)/took.Seconds()/1e6, float64(offs)/took.Seconds()/1e6,
			cpu.Round(time.Millisecond), float64(n)/cpu.Seconds()/1e6, ms.HeapAlloc>>20,
			first, firstAt.Round(time.Millisecond), answeredAt.Round(time.Millisecond), stillLoading)
	}
}

// freshPageCost is the CPU time the process spends per 4 KiB page the first
// time it writes to n bytes of newly mapped memory: what a restarted
// process pays for every page of the state it loads (page faults and the
// kernel's zeroing; on the VMs these benchmarks ran on, far more than on
// bare metal).
func freshPageCost(t *testing.T, n int) time.Duration {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	c0 := processCPU()
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return (processCPU() - c0) / time.Duration(n/4096)
}
