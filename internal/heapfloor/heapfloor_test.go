package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testwait"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor int64
		base, want  int
	}{
		{4 * mib, 64 * mib, 100, 1500}, // 4 MiB live: goal 4 × 16 = 64 MiB
		{5 * mib, 64 * mib, 100, 1180}, // rounded up: 5 × 12.8 = 64 MiB
		{32 * mib, 64 * mib, 100, 100}, // the default goal already reaches it
		{40 * mib, 64 * mib, 100, 100}, // above it
		{20 * mib, 64 * mib, 300, 300}, // GOGC=300 reaches it
		{20 * mib, 64 * mib, 100, 220}, // 20 × 3.2 = 64
		{1, 64 * mib, 100, 1600},       // the minimum goal: 4 MiB × 16
		{1 * mib, 64 * mib, 100, 1600}, // also: before 1 MiB × 64
		{0, 64 * mib, 100, 1600},       // nothing live: the minimum goal
		{4 * mib, 64 * mib, -1, -1},    // GOGC=off stays off
		{4 * mib, 0, 100, 100},         // no floor
		{4 * mib, 2 * mib, 100, 100},   // the default minimum goal is above the floor
		{3 * mib, 10 * mib, 100, 234},  // 3 + 3×2.34 = 10.02 ≥ 10; 2.33 gives 9.99
	} {
		got := Percent(tc.live, tc.floor, tc.base)
		if got != tc.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
		}
		if got > 0 && max(tc.live+tc.live*int64(got)/100, heapMinimum*int64(got)/100) < tc.floor {
			t.Errorf("Percent(%d, %d, %d) = %d puts the goal below the floor", tc.live, tc.floor, tc.base, got)
		}
	}
}

// TestStartRaisesTheGoal allocates the same garbage with a small live heap
// without and with a floor, and counts the collections: with a 64 MiB floor,
// 256 MiB of garbage takes about four (a few more at the edges), and the
// runtime's GOGC is raised well above 100; stop restores GOGC. The count
// without a floor is only logged: on a loaded machine the collector's
// workers get less CPU, each cycle spans more allocation, and one CI run saw
// 7 collections where an idle machine sees about 64.
func TestStartRaisesTheGoal(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	cycles := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	var sink []byte
	churn := func() uint64 {
		runtime.GC()
		c0 := cycles()
		for range 256 << 20 >> 16 { // 256 MiB in 64 KiB pieces
			sink = make([]byte, 64<<10)
		}
		return cycles() - c0
	}
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	without := churn()
	stop := Start(64 << 20)
	runtime.GC() // the first adjustment after a collection
	raised := gogc()
	with := churn()
	stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after stop: %d, want 100", got)
	}
	_ = sink
	t.Logf("collections for 256 MiB of garbage: %d without a floor, %d with 64 MiB (GOGC %d)", without, with, raised)
	if raised < 800 { // a few MiB live: the goal needs 64 MiB / a few MiB
		t.Errorf("GOGC with the floor and a small live heap: %d", raised)
	}
	if with == 0 || with > 8 {
		t.Fatalf("a 64 MiB floor left %d collections for 256 MiB of garbage, want about 4", with)
	}
}

// TestFloorFollowsTheLiveHeap: the percent is recomputed after every
// collection, so once the live heap alone reaches the floor's goal the
// configured GOGC is back (a percent kept from a small heap would let a large
// one grow many times over).
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	tu, stop := start(32 << 20)
	defer stop()
	runtime.GC()
	testwait.Until(10*time.Second, func() bool { return tu.percent() > 100 })
	if p := tu.percent(); p <= 100 {
		t.Fatalf("small live heap: GOGC %d, want above 100", p)
	}
	live := make([][]byte, 48)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	testwait.Until(10*time.Second, func() bool { return tu.percent() == 100 })
	if p := tu.percent(); p != 100 {
		t.Fatalf("48 MiB live, 32 MiB floor: GOGC %d, want 100", p)
	}
	runtime.KeepAlive(live)
}

// TestFloorKeepsToHalfTheMemoryLimit: under GOMEMLIMIT the floor is at most
// half of the limit.
func TestFloorKeepsToHalfTheMemoryLimit(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(16 << 20))
	tu, stop := start(64 << 20)
	defer stop()
	if tu.floor != 8<<20 {
		t.Fatalf("floor under a 16 MiB limit: %d, want 8 MiB", tu.floor)
	}
}

// TestFloorSet moves a running floor: raising it raises the percent at
// once, lowering it below what the live heap's default goal reaches brings
// the configured GOGC back at once, and under GOMEMLIMIT a raised floor
// keeps to half the limit; Stop restores GOGC.
func TestFloorSet(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	f := New(1 << 20) // below the collector's own minimum goal: no change
	runtime.GC()
	if p := f.t.percent(); p != 100 {
		t.Fatalf("1 MiB floor: GOGC %d, want 100", p)
	}
	f.Set(256 << 20)
	if p := f.t.percent(); p <= 1000 {
		t.Fatalf("256 MiB floor with a small live heap: GOGC %d, want well above 100", p)
	}
	f.Set(1 << 20)
	if p := f.t.percent(); p != 100 {
		t.Fatalf("floor lowered to 1 MiB: GOGC %d, want 100", p)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	f.Set(1 << 30)
	f.t.mu.Lock()
	floor := f.t.floor
	f.t.mu.Unlock()
	if floor != 32<<20 {
		t.Fatalf("1 GiB floor under a 64 MiB limit: %d, want 32 MiB", floor)
	}
	f.Stop()
	f.Set(256 << 20) // stopped: nothing
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after Stop and a later Set: %d, want 100", got)
	}
}

// TestInactiveFloorSet: with GOGC=off the floor does nothing, Set included.
func TestInactiveFloorSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	f := New(64 << 20)
	f.Set(1 << 30)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GOGC=off became %d", got)
	}
	f.Stop()
}

func TestLoadFloor(t *testing.T) {
	const mib = int64(1) << 20
	for _, tc := range []struct{ state, floor, want int64 }{
		{134 * mib, 64 * mib, 536 * mib}, // the benchmark's 10M offsets
		{10 * mib, 64 * mib, 64 * mib},   // a small state: the usual floor
		{0, 64 * mib, 64 * mib},          // nothing stored
		{134 * mib, 0, 0},                // the floor turned off stays off
		{10 << 30, 64 * mib, LoadCap},    // capped
	} {
		if got := LoadFloor(tc.state, tc.floor); got != tc.want {
			t.Errorf("LoadFloor(%d, %d) = %d, want %d", tc.state, tc.floor, got, tc.want)
		}
	}
}
