package cluster

import (
	"slices"
	"time"
)

// View is what one node knows when it decides: the live set and the
// ownership keys as its watch shows them, what it serves, its lease and its
// own clock. Decide is a pure function of it.
type View struct {
	Self       int32
	Partitions int
	// Nodes are the registered (live) node ids.
	Nodes []int32
	// Owners are the ownership keys seen, by partition.
	Owners map[int32]Holder
	// Mine are the partitions this node serves, with the create revision of
	// the key it serves them through.
	Mine map[int32]int64
	// Lease is the current session's lease (0: no session).
	Lease LeaseID
	// Now, Deadline and Margin: this node's clock, its local lease deadline
	// and the safety margin kept before it (see LeaseValid).
	Now, Deadline time.Time
	Margin        time.Duration
}

// Actions is what a node does next, in this order: Expired (stop serving
// everything and end the session; nothing else is set), Lost, Adopt, Stray,
// Release, Acquire.
type Actions struct {
	// Expired: the lease is no longer valid by this node's clock.
	Expired bool
	// Lost: partitions served whose key is now another one (or gone): stop
	// serving them, delete nothing.
	Lost []int32
	// Adopt: this session's keys that are not served (an acquisition whose
	// answer was lost) on partitions targeted here: serve them.
	Adopt []int32
	// Stray: this session's keys, not served, on partitions targeted
	// elsewhere: delete them.
	Stray []int32
	// Release: partitions served but targeted elsewhere (or this node is not
	// registered): stop serving, then delete the key (hand-over).
	Release []int32
	// Acquire: free partitions targeted here: create their keys.
	Acquire []int32
}

// Empty reports whether there is nothing to do.
func (a Actions) Empty() bool {
	return !a.Expired && len(a.Lost)+len(a.Adopt)+len(a.Stray)+len(a.Release)+len(a.Acquire) == 0
}

// LeaseValid reports whether a lease whose local deadline is deadline may
// still be acted on at now: only strictly before deadline-margin. deadline
// is the zero time when there is no lease.
func LeaseValid(now, deadline time.Time, margin time.Duration) bool {
	return !deadline.IsZero() && now.Before(deadline.Add(-margin))
}

// Decide computes a node's next actions from its view. The target of every
// partition is Assign over the live set; a node acquires only a free key
// targeted at it, and gives up (without deleting anything) a partition whose
// key is not the one it acquired. Every list is sorted.
func Decide(v View) Actions {
	var a Actions
	if !LeaseValid(v.Now, v.Deadline, v.Margin) {
		a.Expired = true
		return a
	}
	registered := slices.Contains(v.Nodes, v.Self)
	target := Assign(v.Partitions, v.Nodes)
	targeted := func(p int32) bool { return registered && p >= 0 && int(p) < len(target) && target[p] == v.Self }
	for p, rev := range v.Mine {
		o, ok := v.Owners[p]
		switch {
		case !ok || o.CreateRev != rev:
			a.Lost = append(a.Lost, p)
		case !targeted(p):
			a.Release = append(a.Release, p)
		}
	}
	for p, o := range v.Owners {
		if _, mine := v.Mine[p]; mine || v.Lease == 0 || o.Lease != v.Lease || o.Node != v.Self {
			continue
		}
		if targeted(p) {
			a.Adopt = append(a.Adopt, p)
		} else {
			a.Stray = append(a.Stray, p)
		}
	}
	if registered {
		for p := range target {
			q := int32(p)
			if _, mine := v.Mine[q]; targeted(q) && !mine {
				if _, held := v.Owners[q]; !held {
					a.Acquire = append(a.Acquire, q)
				}
			}
		}
	}
	for _, l := range [][]int32{a.Lost, a.Adopt, a.Stray, a.Release, a.Acquire} {
		slices.Sort(l)
	}
	return a
}
