// Package coordinator is the runtime around package group: it hashes groups to
// coordinator partitions the way Kafka hashes group ids to partitions of
// __consumer_offsets, runs each request against its partition's shard on the
// caller's goroutine under the partition's mutex (so a shard sees one call at
// a time and needs no locks), drives the partition's timers from an injected
// clock on a loop goroutine per partition, loads a partition's state from the
// store before serving it, and applies every handler's result as
// records-then-replies: records go to the store in batches (group commit
// across partitions, pipelined when the store allows), and replies that
// depend on them are released only once the store says they are durable.
package coordinator

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
)

// Config configures a Coordinator.
type Config struct {
	// Partitions is the number of coordinator partitions (Kafka's
	// offsets.topic.num.partitions, 50). Changing it moves groups between
	// partitions, so it must stay fixed for a data directory.
	Partitions int
	// Group holds the group semantics settings.
	Group group.Config
	// Store persists the partitions' records. Required.
	Store store.Store
	// Clock drives timers; nil means the wall clock.
	Clock clock.Clock
	// Rand is the source of member-id randomness; nil means crypto/rand.
	Rand io.Reader
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
	// RetentionCheckInterval is how often expired offsets are removed
	// (offsets.retention.check.interval.ms, 10 minutes).
	RetentionCheckInterval time.Duration
	// Owned reports whether this node serves partition p. Nil means every
	// partition (one node). Cluster mode changes ownership with Acquire and
	// Release.
	Owned func(p int32) bool
	// LoadConcurrency bounds how many partitions replay their records at
	// once; 0 means all of them. Replaying a local store is CPU-bound: all
	// partitions at once finish together near the end, while a few at a
	// time (the node uses GOMAXPROCS for its disk store) let the first
	// ones serve requests while the others still load. Loads from a remote
	// store (etcd) wait on the network and are left unbounded.
	LoadConcurrency int
	// OnUnload, when set, is called with p whenever this node drops the
	// state of partition p: released (cluster mode), loaded again from the
	// store (after a write that failed once applied, or a panic of the
	// shard), or the coordinator closing. What the group callbacks told of
	// the partition's groups (group.Config OnStorm's flags) no longer holds;
	// the shard that loads the partition next tells it again. Called with
	// the partition's mutex held: it must be cheap and must not call into
	// the coordinator.
	OnUnload func(p int32)
	// ErrorHint, when set, says what an operator can do about an error
	// of the store ("" when it has nothing to say): the warnings of failed
	// appends and loads carry it as their "hint" attribute. Cluster mode
	// sets it to cluster.NoUserHint. Clients still get an error code
	// alone.
	ErrorHint func(error) string
}

// withHint is the attributes of a log line about the store's error err,
// with "hint" added when Config.ErrorHint has one.
func (c *Coordinator) withHint(err error, attrs ...any) []any {
	if c.cfg.ErrorHint != nil {
		if h := c.cfg.ErrorHint(err); h != "" {
			attrs = append(attrs, "hint", h)
		}
	}
	return attrs
}

// Coordinator serves the group APIs for the partitions it owns.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock
	// appendFails bounds the warnings of the committer's failed appends.
	appendFails failureLog
	parts       []*partition
	// loadSlots bounds concurrent partition loads (Config.LoadConcurrency);
	// nil: unbounded.
	loadSlots chan struct{}
	// regexes runs the node's regex matchings, one slice at a time
	// (partition.resolveTurn), each of regexSlice work
	// (group.RegexSliceBudget). For tests: resolveGate, if set, runs
	// before each slice; regexResolvedHook after a result reaches its
	// shard.
	regexes           regexRunner
	regexSlice        int
	resolveGate       func(group.RegexJob)
	regexResolvedHook func(group.RegexResult)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Group commit across partitions, when the store supports it: partitions
	// queue their batches for the committer, which writes everything queued
	// with a single AppendMulti (one fsync) per round. The committer is a
	// role, not a goroutine: a request's caller that finds it free runs
	// rounds itself (runRounds), else the committer goroutine does.
	closeOnce  sync.Once
	multi      store.MultiAppender
	cmu        sync.Mutex  // guards cqueue, cspare, cbusy; taken after a partition's mu, never before
	cqueue     []commitReq // batches waiting for the next round, in hand-over order
	cspare     []commitReq // the previous round's slice, reused
	cbusy      bool        // someone holds the committer role
	cwake      chan struct{}
	commitStop chan struct{}
	commitDone chan struct{}
	// The role's buffers, used only by its holder.
	prs  []store.PartitionRecords
	flat []store.Record
	// With a store.Pipeliner the committer starts a round while earlier
	// ones sync; waitRounds reports them in order.
	pipe       store.Pipeliner
	rounds     chan round
	roundsDone chan struct{}
}

// commitReq is one partition's batch for the cross-partition committer.
type commitReq struct {
	p *partition
	b batch
}

// New returns a coordinator; Start begins loading and serving.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil {
		return nil, errors.New("coordinator: Config.Store is required")
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 50
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetentionCheckInterval <= 0 {
		cfg.RetentionCheckInterval = 10 * time.Minute
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, regexSlice: group.RegexSliceBudget}
	c.regexes.c = c
	if cfg.LoadConcurrency > 0 {
		c.loadSlots = make(chan struct{}, cfg.LoadConcurrency)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for i := 0; i < cfg.Partitions; i++ {
		c.parts = append(c.parts, newPartition(c, int32(i)))
	}
	if m, ok := cfg.Store.(store.MultiAppender); ok {
		c.multi = m
		// At most one wake-up is pending (see enqueue), so a send never
		// blocks.
		c.cwake = make(chan struct{}, 1)
		c.commitStop = make(chan struct{})
		c.commitDone = make(chan struct{})
		if p, ok := m.(store.Pipeliner); ok {
			c.pipe = p
			c.rounds = make(chan round, maxRounds-1)
			c.roundsDone = make(chan struct{})
		}
	}
	return c, nil
}

// The committer role. Partitions queue their batches (enqueue) under their
// own mutex; whoever holds the role takes everything queued and writes it
// with one AppendMulti (or StartMulti, when the store pipelines) per round,
// so the rounds go to the store in hand-over order and each round carries
// every batch that arrived during the last one (group commit).
//
// The role is taken by the goroutine of a request whose call queued a batch
// while nobody held it (kick, after the partition's mutex is released), or
// else by the committer goroutine, woken by enqueue. Running the round on the
// caller's goroutine saves two hand-offs per commit when the committer is idle
// (a wake-up of the committer, then one of the caller): on a busy machine each
// hand-off waits for a core behind every runnable connection goroutine. A
// caller runs at most inlineRounds rounds, then passes the role (and what is
// still queued) to the committer goroutine, so that its own connection is
// not kept waiting behind other partitions' traffic.

// inlineRounds bounds the rounds a request's goroutine runs before it hands
// the committer role to the committer goroutine.
const inlineRounds = 1

// enqueue queues one partition's batch for the committer (called with the
// partition's mu held). With deferKick the caller takes the role itself
// after releasing the partition (kick) if nobody holds it; otherwise the
// committer goroutine is woken if nobody holds the role.
func (c *Coordinator) enqueue(r commitReq, deferKick bool) {
	c.cmu.Lock()
	c.cqueue = append(c.cqueue, r)
	wake := !c.cbusy && !deferKick
	if wake {
		c.cbusy = true
	}
	c.cmu.Unlock()
	if wake {
		// Only the role's holder sends, once, and the goroutine takes
		// the role with the wake-up: the buffer of one never fills.
		c.cwake <- struct{}{}
	}
}

// kick runs the committer's rounds on the calling goroutine if something is
// queued and nobody holds the role. Called without any partition's mu.
func (c *Coordinator) kick() {
	c.cmu.Lock()
	if c.cbusy || len(c.cqueue) == 0 {
		c.cmu.Unlock()
		return
	}
	c.cbusy = true
	c.cmu.Unlock()
	c.runRounds(inlineRounds)
}

// commitLoop is the committer goroutine: it holds the role from each
// wake-up until the queue is empty.
func (c *Coordinator) commitLoop() {
	defer close(c.commitDone)
	for {
		select {
		case <-c.cwake:
			c.runRounds(-1)
		case <-c.commitStop:
			return
		}
	}
}

// runRounds writes what is queued, round after round, by the role's holder:
// until the queue is empty (then the role is free), or, after limit rounds
// (limit ≥ 0), handing the role to the committer goroutine.
func (c *Coordinator) runRounds(limit int) {
	for i := 0; ; i++ {
		c.cmu.Lock()
		if len(c.cqueue) == 0 {
			c.cbusy = false
			c.cmu.Unlock()
			return
		}
		if limit >= 0 && i >= limit {
			c.cmu.Unlock()
			c.cwake <- struct{}{} // the role passes on with the wake-up
			return
		}
		reqs := c.cqueue
		c.cqueue, c.cspare = c.cspare[:0], nil
		c.cmu.Unlock()
		if reuse := c.round(reqs); reuse {
			clear(reqs)
			c.cmu.Lock()
			c.cspare = reqs[:0]
			c.cmu.Unlock()
		}
	}
}

// round writes one round's batches; true if reqs is free again (reported),
// false if a pipelined round still holds it.
func (c *Coordinator) round(reqs []commitReq) (reuse bool) {
	// One records buffer for the round, reused: stores do not retain the
	// slices once AppendMulti or StartMulti returns.
	prs, flat := c.prs[:0], c.flat[:0]
	for _, r := range reqs {
		start := len(flat)
		flat = r.b.appendRecords(flat)
		prs = append(prs, store.PartitionRecords{Partition: r.p.id, Records: flat[start:len(flat):len(flat)], Owner: r.b.owner})
	}
	defer func() {
		clear(flat) // drop the references to the records' bytes
		clear(prs)
		c.prs, c.flat = prs[:0], flat[:0]
	}()
	if c.pipe != nil {
		// Fix the round's place in the log, then let the waiter report
		// it once durable while the next round starts.
		wait, err := c.pipe.StartMulti(context.Background(), prs)
		c.rounds <- round{reqs: reqs, wait: wait, err: err}
		return false
	}
	err := c.multi.AppendMulti(context.Background(), prs)
	c.report(reqs, err)
	return true
}

// round is one AppendMulti of the committer, started but not yet reported.
type round struct {
	reqs []commitReq
	wait func() error // nil if starting it failed (err)
	err  error
}

// maxRounds bounds the committer's rounds started and not yet durable.
const maxRounds = 4

// waitRounds reports the committer's rounds in the order they were started,
// each once it is durable.
func (c *Coordinator) waitRounds() {
	defer close(c.roundsDone)
	for r := range c.rounds {
		err := r.err
		if r.wait != nil {
			err = r.wait()
		}
		c.report(r.reqs, err)
	}
}

// report hands the result of one append to the partitions it wrote for
// (their loops apply it).
func (c *Coordinator) report(reqs []commitReq, err error) {
	code := group.ErrNone
	if err != nil {
		code = storeErrorCode(err)
		if log, unlogged := c.appendFails.note(c.clock.Now()); log {
			c.log.Warn("coordinator: append failed", c.withHint(err, "partitions", len(reqs), "err", err, "failed_unlogged", unlogged)...)
		}
	}
	for _, r := range reqs {
		res := appendResult{writes: r.b.writes, code: code, gen: r.b.gen}
		if r.p.tryAppendDone(res) {
			continue
		}
		r.p.sent.Add(1)
		r.p.results <- res
	}
}

// Start loads every owned partition (in the background: a partition answers
// COORDINATOR_LOAD_IN_PROGRESS until it is loaded) and starts the loops.
func (c *Coordinator) Start() {
	if c.multi != nil {
		go c.commitLoop()
		if c.pipe != nil {
			go c.waitRounds()
		}
	}
	for _, p := range c.parts {
		owned := c.cfg.Owned == nil || c.cfg.Owned(p.id)
		if owned {
			// Loading before the loop starts: requests run on their
			// callers' goroutines and may arrive first.
			p.mu.Lock()
			p.startLoad()
			p.mu.Unlock()
		}
		c.wg.Add(1)
		go p.run(owned)
	}
}

// WaitLoaded blocks until every owned partition has loaded or ctx ends.
func (c *Coordinator) WaitLoaded(ctx context.Context) error {
	for _, p := range c.parts {
		select {
		case <-p.loaded:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops every loop: parked requests are answered NOT_COORDINATOR and
// in-flight writes are waited for.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		if c.multi != nil {
			// Every partition is drained: nothing is queued or in a
			// round, and nobody holds the committer role any more.
			close(c.commitStop)
			<-c.commitDone
			if c.pipe != nil {
				close(c.rounds)
				<-c.roundsDone
			}
		}
	})
	return nil
}

// Acquire makes this node serve partition p: it loads p's state from the
// store, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile. The load starts
// before Acquire returns, under the store's ownership token of this moment
// (the cluster sets it just before).
func (c *Coordinator) Acquire(p int32) { c.parts[p].acquire() }

// Release stops serving partition p at once: when it returns, parked
// requests have been answered NOT_COORDINATOR and later requests get
// NOT_COORDINATOR. The cluster hands p to another node right after, so this
// is done on the caller's goroutine, not left to the partition's loop.
func (c *Coordinator) Release(p int32) { c.parts[p].release() }

// TopicsDeleted removes the committed offsets of topics deleted from the
// catalog from every group of the partitions this node serves, as Kafka's
// coordinator does when a topic is deleted. A partition still loading
// removes them once loaded; a partition another node serves is left to
// that node, which hears of the deletion from its own catalog.
func (c *Coordinator) TopicsDeleted(names []string) {
	if len(names) == 0 {
		return
	}
	for _, p := range c.parts {
		p.mu.Lock()
		p.deletedTopics = append(p.deletedTopics, names...)
		p.mu.Unlock()
		p.control(ctlTopicsDeleted)
	}
}

// Partitions returns the number of coordinator partitions.
func (c *Coordinator) Partitions() int { return len(c.parts) }

// PartitionFor returns the coordinator partition of a group id:
// abs(javaHashCode(id)) % n, with abs(MinInt32) = 0, as Kafka does.
func PartitionFor(groupID string, n int) int32 {
	var h int32
	for _, r := range groupID {
		if r >= 0x10000 { // UTF-16 surrogate pair
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -2147483648 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(n)
}

// Handle serves one group-scoped request (group.LookupAPI describes which):
// a request about one group runs on that group's partition; a request about
// several groups is split by partition and the answers merged; ListGroups
// asks every partition. It blocks until the answer is ready (a JoinGroup
// parks until its rebalance completes) or ctx ends.
func (c *Coordinator) Handle(ctx context.Context, cl group.Client, req kmsg.Request) (kmsg.Response, error) {
	api := group.LookupAPI(req.Key())
	if api == nil {
		return nil, fmt.Errorf("coordinator: unsupported request key %d", req.Key())
	}
	if pre := api.Precheck; pre != nil {
		if code := pre(req); code != group.ErrNone {
			return api.Error(req, code), nil // before ownership and loading, as Kafka
		}
	}
	if one := api.Group; one != nil {
		return c.parts[PartitionFor(one(req), len(c.parts))].call(ctx, cl, req)
	}
	ids, multi, all := api.Groups(req)
	switch {
	case all:
		// Every partition's answer, partition i's at i, as Merge expects.
		parts := make([]kmsg.Response, 0, len(c.parts))
		for _, p := range c.parts {
			resp, err := p.call(ctx, cl, req)
			if err != nil {
				return nil, err
			}
			parts = append(parts, resp)
		}
		return api.Merge(req, parts), nil
	case multi:
		// Split the groups by partition, in partition order of first
		// appearance; Merge restores the request's order.
		byPart := map[int32][]int{}
		var order []int32
		for i, id := range ids {
			p := PartitionFor(id, len(c.parts))
			if _, ok := byPart[p]; !ok {
				order = append(order, p)
			}
			byPart[p] = append(byPart[p], i)
		}
		parts := make([]kmsg.Response, 0, len(order))
		for _, p := range order {
			resp, err := c.parts[p].call(ctx, cl, api.Split(req, byPart[p]))
			if err != nil {
				return nil, err
			}
			parts = append(parts, resp)
		}
		return api.Merge(req, parts), nil
	}
	return c.parts[PartitionFor(ids[0], len(c.parts))].call(ctx, cl, req)
}
