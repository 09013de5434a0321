package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/heapfloor"
	"github.com/cohort-dev/cohort/internal/hugepages"
	"github.com/cohort-dev/cohort/internal/testchild"
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
// directory (removed at the end), then COHORT_BENCH_REPEAT (3) restarts on
// it: each load runs in a new process (this test binary again), as a
// restarted node would, and is timed from the coordinator's start until
// every partition has loaded: records replayed per second of wall time and
// of the process's CPU time (on a machine shared with other jobs the second
// is the steadier). During each load, as soon as the first partition has
// loaded and while others still load, an OffsetFetch for one of its groups
// must be answered with the group's offset (a loaded partition serves while
// the rest load).
//
// The new process advises its heap to use huge pages as cohort serve does
// by default (--heap-huge-pages); COHORT_BENCH_LOAD_HUGEPAGES=off loads
// without, COHORT_BENCH_LOAD_HUGEPAGES=both alternates the two.
// COHORT_BENCH_LOAD_PROFILE=file writes a CPU profile of each load
// (file.<n>); COHORT_BENCH_LOAD_DIR=dir builds the state in dir and keeps
// it for the next run (which reuses it); COHORT_BENCH_LOAD_HEAP=file a heap profile after the last
// load (what the loaded state holds). The partitions load as cohort serve
// loads its own disk store, GOMAXPROCS of them at a time (node's
// Config.LoadConcurrency); COHORT_BENCH_LOAD_CONCURRENCY=all loads every
// partition at once, =both alternates the two, =n loads n at a time. The
// collector's heap floor is cohort serve's too: raised from the store's size
// on disk while loading (heapfloor.LoadFloor), then the usual one;
// COHORT_BENCH_LOAD_FLOOR=off keeps the usual one throughout. Only with
// COHORT_BENCH=1.
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
	modes := []string{"on"}
	switch m := os.Getenv("COHORT_BENCH_LOAD_HUGEPAGES"); m {
	case "", "on":
	case "off":
		modes = []string{"off"}
	case "both":
		modes = []string{"on", "off"}
	default:
		t.Fatalf("COHORT_BENCH_LOAD_HUGEPAGES=%q: want on, off or both", m)
	}
	concurrency := []int{runtime.GOMAXPROCS(0)}
	switch c := os.Getenv("COHORT_BENCH_LOAD_CONCURRENCY"); c {
	case "", "node":
	case "all":
		concurrency = []int{0}
	case "both":
		concurrency = []int{runtime.GOMAXPROCS(0), 0}
	default:
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			t.Fatalf("COHORT_BENCH_LOAD_CONCURRENCY=%q: want node, all, both or a number", c)
		}
		concurrency = []int{n}
	}
	dir := t.TempDir()
	start := time.Now()
	var written int
	if keep := os.Getenv("COHORT_BENCH_LOAD_DIR"); keep != "" {
		// A state built by an earlier run for the same group count is
		// reused; otherwise it is built there and kept.
		dir = keep
		marker := dir + ".groups" // beside the store, not in it
		if b, err := os.ReadFile(marker); err == nil && string(b) == strconv.Itoa(groups) {
			t.Logf("reusing the state built in %s", dir)
		} else {
			if err := os.RemoveAll(dir); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			written = buildLargeState(t, dir, groups, loadPerGroup, loadPartitions)
			if err := os.WriteFile(marker, []byte(strconv.Itoa(groups)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		written = buildLargeState(t, dir, groups, loadPerGroup, loadPartitions)
	}
	bytes := disk.DirBytes(dir)
	t.Logf("built %d groups, %d offsets (%d records written, %.0f MiB on disk) in %v",
		groups, groups*loadPerGroup, written, float64(bytes)/(1<<20), time.Since(start).Round(time.Millisecond))
	t.Logf("fresh memory on this machine: %.1f µs of CPU per 4 KiB page first touched (%d MiB mapped and written)", freshPageCost(t, 256<<20).Seconds()*1e6, 256)
	for rep := range repeat {
		for i, run := range loadRuns(modes, concurrency) {
			mode, conc := run.mode, run.concurrency
			env := []string{loadChildEnv + "=" + dir, "COHORT_LOAD_CHILD_GROUPS=" + strconv.Itoa(groups),
				"COHORT_BENCH_LOAD_HUGEPAGES=" + mode, "COHORT_LOAD_CHILD_REP=" + strconv.Itoa(rep),
				"COHORT_LOAD_CHILD_CONCURRENCY=" + strconv.Itoa(conc)}
			if rep != repeat-1 || i != len(modes)*len(concurrency)-1 {
				env = append(env, "COHORT_BENCH_LOAD_HEAP=")
			}
			child, out := testchild.Start(t, env...)
			var r restartLoad
			for out.Scan() {
				if line, ok := strings.CutPrefix(out.Text(), "load-result "); ok {
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := child.Cmd.Wait(); err != nil || r.Records == 0 {
				t.Fatalf("load %d (huge pages %s): the child failed: %v (its log is above)", rep, mode, err)
			}
			took, cpu := time.Duration(r.WallNs), time.Duration(r.CPUNs)
			loading := "all partitions at once"
			if conc > 0 {
				loading = fmt.Sprintf("%d partitions at a time", conc)
			}
			t.Logf("load %d, %s, heap floor %d MiB while loading, huge pages %s (%s): %d records in %v = %.2fM records/s (%.2fM offsets/s); process CPU %v (%.2fM records per CPU second); live heap %d MiB; first partition (%d) loaded at %v, its group answered at %v with %d partitions still loading",
				rep, loading, r.FloorMiB, mode, r.HugePages, r.Records, took.Round(time.Millisecond), float64(r.Records)/took.Seconds()/1e6,
				float64(r.Offsets)/took.Seconds()/1e6, cpu.Round(time.Millisecond), float64(r.Records)/cpu.Seconds()/1e6,
				r.HeapMiB, r.First, time.Duration(r.FirstNs).Round(time.Millisecond),
				time.Duration(r.AnsweredNs).Round(time.Millisecond), r.StillLoading)
		}
	}
}

// loadRun is one load of TestLoadAfterRestart's series: huge pages on or
// off, and how many partitions load at a time (0: all).
type loadRun struct {
	mode        string
	concurrency int
}

// loadRuns is every combination of modes and concurrencies, alternated.
func loadRuns(modes []string, concurrency []int) []loadRun {
	var runs []loadRun
	for _, m := range modes {
		for _, c := range concurrency {
			runs = append(runs, loadRun{m, c})
		}
	}
	return runs
}

const (
	loadPerGroup, loadPartitions = 100, 50
	// loadChildEnv names the store directory a child process of
	// TestLoadAfterRestart loads (TestMain runs loadChild instead of the
	// tests when it is set).
	loadChildEnv = "COHORT_LOAD_CHILD_DIR"
)

// restartLoad is what a load child reports to TestLoadAfterRestart.
type restartLoad struct {
	Records, Offsets    int64
	WallNs, CPUNs       int64
	HeapMiB             uint64
	First, StillLoading int
	FirstNs, AnsweredNs int64
	HugePages           string
	FloorMiB            int64 // the collector's heap floor while loading
}

// loadChild is a restarted node's load: it opens the store at dir, starts
// a coordinator on it and reports, as one "load-result {json}" line on
// standard output, how long the load took and what it loaded.
func loadChild(dir string) error {
	groups, err := strconv.Atoi(os.Getenv("COHORT_LOAD_CHILD_GROUPS"))
	if err != nil {
		return err
	}
	var r restartLoad
	// The collector's floor as cohort serve sets it: raised from the
	// store's size on disk while loading (COHORT_BENCH_LOAD_FLOOR=off: the
	// usual floor throughout, as before the raise).
	normal := int64(heapfloor.DefaultMiB) << 20
	floorBytes := normal
	if os.Getenv("COHORT_BENCH_LOAD_FLOOR") != "off" {
		floorBytes = heapfloor.LoadFloor(disk.DirBytes(dir), normal)
	}
	floor := heapfloor.New(floorBytes)
	defer floor.Stop()
	r.FloorMiB = floorBytes >> 20
	r.HugePages = "off"
	if os.Getenv("COHORT_BENCH_LOAD_HUGEPAGES") != "off" {
		hp, stop, err := hugepages.Enable(hugepages.DefaultReserve)
		if err != nil {
			return err
		}
		defer stop()
		r.HugePages = fmt.Sprintf("system mode %s, %d MiB reserved, %d MiB advised", hp.Mode, hp.Reserved>>20, hp.Advised>>20)
	}
	st, err := disk.Open(disk.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer st.Close()
	cs := &countingStore{Store: st}
	if path := os.Getenv("COHORT_BENCH_LOAD_PROFILE"); path != "" {
		f, err := os.Create(path + "." + os.Getenv("COHORT_LOAD_CHILD_REP"))
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	conc, err := strconv.Atoi(os.Getenv("COHORT_LOAD_CHILD_CONCURRENCY"))
	if err != nil {
		return fmt.Errorf("COHORT_LOAD_CHILD_CONCURRENCY: %w", err)
	}
	c, err := New(Config{Partitions: loadPartitions, Group: group.Defaults(), Store: cs, LoadConcurrency: conc})
	if err != nil {
		return err
	}
	defer c.Close()
	cases := make([]reflect.SelectCase, len(c.parts))
	for i, p := range c.parts {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.loaded)}
	}
	cpu0 := processCPU()
	t0 := time.Now()
	c.Start()
	first, _, _ := reflect.Select(cases)
	r.First, r.FirstNs = first, int64(time.Since(t0))
	// A group of the first partition loaded, answered while others load.
	gi := 0
	for ; gi < groups && PartitionFor(fmt.Sprintf("group-%05d", gi), loadPartitions) != int32(first); gi++ {
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version, f.Group = 7, fmt.Sprintf("group-%05d", gi)
	f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "topic-0", Partitions: []int32{3}}}
	resp, err := c.Handle(ctx, group.Client{ID: "load-check"}, f)
	r.AnsweredNs = int64(time.Since(t0))
	cancel()
	if err != nil {
		return err
	}
	for _, p := range c.parts {
		select {
		case <-p.loaded:
		default:
			r.StillLoading++
		}
	}
	fr := resp.(*kmsg.OffsetFetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != int64(gi*1000+3) {
		return fmt.Errorf("OffsetFetch of %s on the first loaded partition: %+v", f.Group, fr)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	err = c.WaitLoaded(ctx)
	floor.Set(normal)
	r.WallNs = int64(time.Since(t0))
	r.CPUNs = int64(processCPU() - cpu0)
	cancel()
	if err != nil {
		return err
	}
	r.Records = cs.n.Load()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapMiB = ms.HeapAlloc >> 20
	if path := os.Getenv("COHORT_BENCH_LOAD_HEAP"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	var gs int
	for _, p := range c.parts {
		gs += p.shardForTest().Len()
		for _, id := range p.shardForTest().GroupIDs() {
			r.Offsets += int64(p.shardForTest().Group(id).NumOffsets())
		}
	}
	if gs != groups || r.Offsets != int64(groups*loadPerGroup) {
		return fmt.Errorf("loaded %d groups, %d offsets; want %d, %d", gs, r.Offsets, groups, groups*loadPerGroup)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Printf("load-result %s\n", b)
	return nil
}

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
