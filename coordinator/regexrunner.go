package coordinator

import (
	"slices"
	"sync"
)

// regexRunner runs the costly regex matchings of every partition of the
// node, one at a time, on one goroutine while there are any: partitions
// with jobs queue for their turn (partition.resolveNext), and each turn
// runs a partition's job for a slice or more (partition.resolveTurn), after
// which a partition with jobs left queues again, behind the others. One
// goroutine, rather than one per partition waiting for a slot, hands the
// next turn over without waking another: under load, waking a goroutine
// between every two slices cost more than the slices.
type regexRunner struct {
	c       *Coordinator
	mu      sync.Mutex   // taken after a partition's mu, never before
	queue   []*partition // waiting for their turn, in the order they asked
	running bool         // the goroutine runs (run)
}

// add queues p for its turn, and starts the goroutine if it is not running.
func (r *regexRunner) add(p *partition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, p)
	if !r.running {
		r.running = true
		go r.run()
	}
}

// run gives the queued partitions their turns until none is left, or the
// coordinator closes.
func (r *regexRunner) run() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 || r.c.ctx.Err() != nil {
			r.queue, r.running = nil, false // closing: the shards go with the partitions
			r.mu.Unlock()
			return
		}
		p := r.queue[0]
		r.queue = slices.Delete(r.queue, 0, 1)
		r.mu.Unlock()
		p.resolveTurn()
	}
}

// waiting is the number of partitions waiting for their turn.
func (r *regexRunner) waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}
