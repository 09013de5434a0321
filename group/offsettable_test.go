package group

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// offsetTable against a map: random puts and drops over a few topics and
// partitions that include negative and huge numbers, then loads (merge) of
// random runs, in and out of order, with repeats; after every step the
// table holds what the map holds, in (topic, partition) order.
func TestOffsetTable(t *testing.T) {
	topics := []string{"a", "bb", "b", "orders", "z", ""}
	parts := []int32{0, 1, 2, 3, 7, 49, 50, -1, math.MaxInt32, math.MinInt32}
	check := func(t *testing.T, tab offsetTable, want map[topicPartition]offset, step string) {
		t.Helper()
		if tab.len() != len(want) {
			t.Fatalf("%s: len %d, want %d", step, tab.len(), len(want))
		}
		var got []topicPartition
		tab.each(func(tp topicPartition, o offset) {
			got = append(got, tp)
			if w, ok := want[tp]; !ok || o != w {
				t.Fatalf("%s: %v = %+v, want %+v (present %v)", step, tp, o, w, ok)
			}
		})
		if !slices.IsSortedFunc(got, func(a, b topicPartition) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		}) {
			t.Fatalf("%s: not in order: %v", step, got)
		}
		for _, tp := range got {
			if !tab.has(tp) {
				t.Fatalf("%s: has(%v) false", step, tp)
			}
		}
		for tp, w := range want {
			if o, ok := tab.get(tp); !ok || o != w {
				t.Fatalf("%s: get(%v) = %+v %v, want %+v", step, tp, o, ok, w)
			}
		}
		for i := range tab {
			if tab[i].extra != nil && len(tab[i].extra) == 0 {
				t.Fatalf("%s: topic %q keeps an empty extra map", step, tab[i].topic)
			}
			for p := range tab[i].extra {
				if _, ok := partIndex(tab[i].parts, p); !ok {
					t.Fatalf("%s: topic %q keeps extra of partition %d it does not hold", step, tab[i].topic, p)
				}
			}
		}
		if len(want) == 0 && tab != nil {
			t.Fatalf("%s: empty table not nil", step)
		}
	}
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		roff := func() offset {
			o := offset{offset: r.Int64(), leaderEpoch: r.Int32(), commitMs: r.Int64()}
			if r.IntN(3) == 0 {
				o.metadata = fmt.Sprint("m", r.IntN(5))
			}
			if r.IntN(4) == 0 {
				o.expireMs = r.Int64()
			}
			return o
		}
		rtp := func() topicPartition {
			return topicPartition{topics[r.IntN(len(topics))], parts[r.IntN(len(parts))]}
		}
		var tab offsetTable
		want := map[topicPartition]offset{}
		// Load first (merge into an empty table), as a partition load does.
		var run []loadedOffset
		for range r.IntN(30) {
			tp := rtp()
			if r.IntN(3) > 0 && len(run) > 0 { // mostly runs of one topic, like the store's order
				tp.topic = run[len(run)-1].tp.topic
			}
			v := roff()
			run = append(run, loadedOffset{tp: tp, off: v})
			want[tp] = v
		}
		tab.merge(run)
		check(t, tab, want, fmt.Sprintf("seed %d merge", seed))
		for i := range 60 {
			tp := rtp()
			switch r.IntN(4) {
			case 0:
				tab.drop(tp)
				delete(want, tp)
			case 1: // a later run merged into a non-empty table
				v := roff()
				tab.merge([]loadedOffset{{tp: tp, off: v}})
				want[tp] = v
			default:
				v := roff()
				tab.put(tp, v)
				want[tp] = v
			}
			check(t, tab, want, fmt.Sprintf("seed %d step %d", seed, i))
		}
	}
}

// An offset costs the table 24 bytes without pointers (the map it replaced
// took 92, all scanned by the garbage collector).
func TestOffsetTableEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(storedOffset{}); n != 24 {
		t.Fatalf("storedOffset is %d bytes, want 24", n)
	}
}
