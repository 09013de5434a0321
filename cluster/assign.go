package cluster

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Assign spreads partitions 0..n-1 over nodes. Every node computes it from
// the same live set and gets the same answer, so no leader is needed: the
// result is a pure function of (n, the set of node ids).
//
// It is rendezvous (highest-random-weight) hashing with bounded load: each
// partition, in order, goes to the node that ranks highest for it among
// those not yet full, where "full" is n/len(nodes) partitions, or one more
// for the first n%len(nodes) nodes that reach it. The bound makes the spread
// exact (loads differ by at most one); the ranking makes it stable: when a
// node joins, the partitions that move are mostly those that rank it first,
// and when a node leaves, mostly its own partitions move (plus a few that the
// bound shifts). Result[p] is -1 only when nodes is empty.
func Assign(n int, nodes []int32) []int32 {
	out := make([]int32, n)
	if len(nodes) == 0 {
		for i := range out {
			out[i] = -1
		}
		return out
	}
	ids := slices.Clone(nodes)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	floor, extra := n/len(ids), n%len(ids)
	load := make(map[int32]int, len(ids))
	atCeil := 0
	type ranked struct {
		id    int32
		score uint64
	}
	rank := make([]ranked, len(ids))
	for p := 0; p < n; p++ {
		for i, id := range ids {
			rank[i] = ranked{id, score(int32(p), id)}
		}
		slices.SortFunc(rank, func(a, b ranked) int {
			if a.score != b.score {
				if a.score > b.score {
					return -1
				}
				return 1
			}
			return int(a.id) - int(b.id)
		})
		for _, r := range rank {
			l := load[r.id]
			if l < floor || (l == floor && atCeil < extra) {
				if l == floor {
					atCeil++
				}
				load[r.id] = l + 1
				out[p] = r.id
				break
			}
		}
	}
	return out
}

func score(p, node int32) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(p))
	binary.BigEndian.PutUint32(b[4:], uint32(node))
	h.Write(b[:])
	x := h.Sum64()
	// finalise (splitmix64) so nearby inputs spread well
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
