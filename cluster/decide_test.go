package cluster

import (
	"reflect"
	"testing"
	"time"
)

// TestDecide: Decide as a table, on 6 partitions and nodes 1, 2, 3, where
// Assign gives node 1 the partitions in target1.
func TestDecide(t *testing.T) {
	const parts = 6
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	all := []int32{1, 2, 3}
	target := Assign(parts, all)
	var target1, other []int32 // node 1's partitions, and the others'
	for p, n := range target {
		if n == 1 {
			target1 = append(target1, int32(p))
		} else {
			other = append(other, int32(p))
		}
	}
	if len(target1) != 2 || len(other) != 4 {
		t.Fatalf("Assign(6, 1..3) gives node 1 %v", target1)
	}
	a, b := target1[0], target1[1]
	x, y := other[0], other[1]
	const lease LeaseID = 77
	mk := func(f func(v *View)) View {
		v := View{Self: 1, Partitions: parts, Nodes: all, Owners: map[int32]Holder{}, Mine: map[int32]int64{},
			Lease: lease, Now: t0, Deadline: t0.Add(3 * time.Second), Margin: 300 * time.Millisecond}
		f(&v)
		return v
	}
	held := func(v *View, p, node int32, rev int64, l LeaseID) {
		v.Owners[p] = Holder{Node: node, CreateRev: rev, Lease: l}
	}
	for _, tc := range []struct {
		name string
		view View
		want Actions
	}{
		{"fresh node acquires its free share", mk(func(v *View) {}), Actions{Acquire: []int32{a, b}}},
		{"a partition held by another node is waited for", mk(func(v *View) { held(v, a, 2, 10, 5) }),
			Actions{Acquire: []int32{b}}},
		{"settled: nothing to do", mk(func(v *View) {
			held(v, a, 1, 10, lease)
			held(v, b, 1, 11, lease)
			v.Mine[a], v.Mine[b] = 10, 11
		}), Actions{}},
		{"a served partition targeted elsewhere is handed over", mk(func(v *View) {
			held(v, x, 1, 12, lease)
			v.Mine[x] = 12
		}), Actions{Release: []int32{x}, Acquire: []int32{a, b}}},
		{"not registered: release everything, acquire nothing", mk(func(v *View) {
			v.Nodes = []int32{2, 3}
			held(v, a, 1, 10, lease)
			v.Mine[a] = 10
		}), Actions{Release: []int32{a}}},
		{"a served partition whose key is another one is lost", mk(func(v *View) {
			held(v, a, 2, 20, 5)
			v.Mine[a] = 10
		}), Actions{Lost: []int32{a}, Acquire: []int32{b}}},
		{"a served partition whose key is gone is lost", mk(func(v *View) { v.Mine[a] = 10 }),
			Actions{Lost: []int32{a}, Acquire: []int32{b}}},
		{"this session's unserved key on a target is adopted", mk(func(v *View) { held(v, a, 1, 10, lease) }),
			Actions{Adopt: []int32{a}, Acquire: []int32{b}}},
		{"this session's unserved key elsewhere is deleted", mk(func(v *View) { held(v, y, 1, 10, lease) }),
			Actions{Stray: []int32{y}, Acquire: []int32{a, b}}},
		{"an earlier session's key is neither adopted nor deleted: it goes with its lease", mk(func(v *View) {
			held(v, a, 1, 10, lease-1)
			held(v, y, 1, 11, lease-1)
		}), Actions{Acquire: []int32{b}}},
		{"lease valid until deadline minus margin", mk(func(v *View) { v.Now = t0.Add(2699 * time.Millisecond) }),
			Actions{Acquire: []int32{a, b}}},
		{"lease over at deadline minus margin: nothing but Expired", mk(func(v *View) {
			v.Now = t0.Add(2700 * time.Millisecond)
			held(v, x, 1, 12, lease)
			v.Mine[x] = 12
		}), Actions{Expired: true}},
		{"no lease: Expired", mk(func(v *View) { v.Deadline = time.Time{}; v.Lease = 0 }), Actions{Expired: true}},
		{"no nodes registered: nothing", mk(func(v *View) { v.Nodes = nil }), Actions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.view)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
			if got.Empty() != reflect.DeepEqual(tc.want, Actions{}) {
				t.Fatalf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
	}
}

// TestLeaseValid: the boundary is exclusive, the margin is subtracted, and
// the zero deadline means no lease.
func TestLeaseValid(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := t0.Add(time.Second)
	for _, tc := range []struct {
		now      time.Time
		deadline time.Time
		margin   time.Duration
		want     bool
	}{
		{t0, d, 0, true},
		{d.Add(-time.Nanosecond), d, 0, true},
		{d, d, 0, false},
		{d.Add(-100 * time.Millisecond), d, 100 * time.Millisecond, false},
		{d.Add(-101 * time.Millisecond), d, 100 * time.Millisecond, true},
		{t0, time.Time{}, 0, false},
	} {
		if got := LeaseValid(tc.now, tc.deadline, tc.margin); got != tc.want {
			t.Errorf("LeaseValid(%v, %v, %v) = %v", tc.now.Sub(t0), tc.deadline.Sub(t0), tc.margin, got)
		}
	}
}
