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
// without and with a floor, and counts the collections: with a 64 MiB
// floor there must be several times fewer; stop restores GOGC.
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
	without := churn()
	stop := Start(64 << 20)
	runtime.GC() // the first adjustment after a collection
	with := churn()
	stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after stop: %d, want 100", got)
	}
	_ = sink
	t.Logf("collections for 256 MiB of garbage: %d without a floor, %d with 64 MiB", without, with)
	if with == 0 || with*4 > without {
		t.Fatalf("a 64 MiB floor left %d collections of %d", with, without)
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
