// Package heapfloor keeps the Go collector's heap goal at or above a floor.
//
// The collector's goal is the live heap times (1 + GOGC/100), at least
// 4 MiB. A coordinator's live state is small until it holds many groups,
// while every request allocates (a 50-partition commit ~20 KB): with a few
// MiB live, the collector ran a hundred times a second under commit load and
// took a third of the server's CPU per 50-partition commit
// (docs/benchmarks.md). A floor of a few tens of MiB lets the garbage of
// that many requests accumulate between collections, at the price of that
// much more resident memory; once the live heap is large (many groups), the
// floor is below the default goal and changes nothing. Under a memory limit
// (GOMEMLIMIT) the floor is at most half of it, and the limit still bounds
// the heap as before.
//
// After every collection the GOGC percent is recomputed from the live heap
// and set with debug.SetGCPercent (no stop-the-world). Only a process's owner
// (cohort serve) starts it: GOGC is process-wide.
package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultMiB is cohort serve's floor (--heap-floor-mib).
const DefaultMiB = 64

// heapMinimum is the collector's smallest goal at GOGC=100; it scales with
// GOGC (the Go GC guide: 4 MiB × GOGC/100), so a percent of
// floor/heapMinimum × 100 alone puts the goal at the floor for any smaller
// live heap.
const heapMinimum = 4 << 20

// Percent returns the GOGC percent that puts the goal of a live heap of live
// bytes at floor bytes or above: base (the configured GOGC) if that already
// does, else the smallest percent that does, either through the live heap or
// through the collector's minimum goal, which grows with the percent.
func Percent(live, floor int64, base int) int {
	if base < 0 || floor <= 0 || live < 0 || live+live*int64(base)/100 >= floor || heapMinimum*int64(base)/100 >= floor {
		return base
	}
	p := (floor*100 + heapMinimum - 1) / heapMinimum // the minimum goal alone reaches floor
	if live > 0 {
		p = min(p, ((floor-live)*100+live-1)/live) // the least p with live*p/100 ≥ floor-live
	}
	return int(max(p, int64(base)))
}

// Start keeps the heap goal at floor bytes or above until stop is called,
// which restores the GOGC percent of the start. With GOGC=off, or floor ≤ 0,
// it does nothing.
func Start(floor int64) (stop func()) {
	_, stop = start(floor)
	return stop
}

// A Floor keeps the heap goal at or above a floor that its owner may move
// (New; Set; Stop).
type Floor struct {
	t    *tuner // nil: inactive (GOGC=off, or no floor)
	stop func()
}

// New starts keeping the heap goal at floor bytes or above, as Start does.
func New(floor int64) *Floor {
	t, stop := start(floor)
	return &Floor{t: t, stop: stop}
}

// Set moves the floor (kept to half of GOMEMLIMIT, as at the start) and
// recomputes the GOGC percent at once from the live heap of the last
// collection. It does nothing on a Floor that started inactive or stopped.
func (f *Floor) Set(floor int64) {
	if f.t == nil {
		return
	}
	f.t.mu.Lock()
	f.t.floor = capFloor(floor)
	f.t.mu.Unlock()
	f.t.adjust()
}

// Stop restores the GOGC percent of the start.
func (f *Floor) Stop() { f.stop() }

// LoadFactor and LoadCap size the floor while a node replays its stored
// state (LoadFloor).
const (
	LoadFactor = 4
	LoadCap    = 4 << 30
)

// LoadFloor is the floor for loading a stored state of stateBytes on disk
// when floor is the usual one: LoadFactor times the state's size (at most
// LoadCap), or floor if that is more.
//
// A load allocates what will stay live: with a floor of a few tens of MiB
// the collector runs at every doubling of the heap and marks the state
// loaded so far each time, a fifth of a 10M-offset load's CPU
// (docs/benchmarks.md). An offset-heavy state takes about four and a half
// times its size on disk in the heap, so a goal of four times the size on
// disk lets the collector run about once during the load, and it stays below
// twice the live state (what GOGC=100 allows anyway) while the heap holds at
// least twice the size on disk.
func LoadFloor(stateBytes, floor int64) int64 {
	if floor <= 0 || stateBytes <= 0 {
		return floor
	}
	return max(floor, min(LoadFactor*stateBytes, LoadCap))
}

// capFloor keeps a floor to half of the memory limit (GOMEMLIMIT): the
// garbage it lets accumulate must not make the limit the collector's usual
// trigger.
func capFloor(floor int64) int64 {
	if limit := debug.SetMemoryLimit(-1); floor > limit/2 {
		return limit / 2
	}
	return floor
}

func start(floor int64) (*tuner, func()) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	floor = capFloor(floor)
	if base < 0 || floor <= 0 {
		return nil, func() {}
	}
	t := &tuner{floor: floor, base: base, cur: base}
	t.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t.adjust()
	t.arm()
	var once sync.Once
	return t, func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.stopped.Store(true)
			debug.SetGCPercent(base)
		})
	}
}

// percent is the GOGC percent the tuner last set.
func (t *tuner) percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

type tuner struct {
	floor   int64
	base    int
	stopped atomic.Bool

	mu     sync.Mutex // guards cur, sample and the percent set
	cur    int
	sample []metrics.Sample
}

// sentinel is an object whose finalizer runs after each collection that
// finds it unreachable: the signal to adjust (it holds a pointer so that it
// is never batched with other tiny objects, whose finalizers may not run).
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

func (t *tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(int64(t.sample[0].Value.Uint64()), t.floor, t.base)
	if p != t.cur {
		debug.SetGCPercent(p)
		t.cur = p
	}
}
