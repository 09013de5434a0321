package coordinator

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/store"
)

// partitionState is where a partition is in its life on this node.
type partitionState int8

const (
	stUnowned partitionState = iota // another node (or none) serves it: NOT_COORDINATOR
	stLoading                       // reading its state: COORDINATOR_LOAD_IN_PROGRESS
	stActive                        // serving
)

type ctl int8

const (
	ctlTopicsDeleted ctl = iota // deletedTopics holds names to remove offsets of
)

// call is one request run against a partition, waiting for its response.
type call struct {
	cl   group.Client
	req  kmsg.Request
	done chan kmsg.Response // buffered: whoever answers never blocks on it
}

// appendResult reports a finished store.Append of a batch of writes.
type appendResult struct {
	writes []group.Write // the batch's, by ID; the slice is the partition's again once applied
	code   int16
	gen    uint64 // shard generation the writes belong to
}

// loadResult carries a freshly loaded shard (or the error) to the loop.
type loadResult struct {
	shard *group.Shard
	err   error
	gen   uint64
}

// partition owns one coordinator partition: its shard, timers and writes.
//
// Requests run on the caller's goroutine under mu (no hand-off to another
// goroutine on the hot path: a heartbeat or an in-memory commit is answered
// by the connection's own goroutine). The partition's loop goroutine handles
// timers, loading, ownership changes and shutdown under the same mutex, and
// the writer or committer applies append results under it. Every turn is one
// handler (or one event) followed by flush, so the shard sees exactly the
// sequence of calls a single-threaded loop would give it.
type partition struct {
	c  *Coordinator
	id int32
	// appendFails bounds the warnings of the writer's failed appends.
	appendFails failureLog

	ctls    chan ctl
	drained chan struct{} // closed when the partition is closed with no batch in flight
	// results carries the committer's reports of this partition's batches
	// (in the order they were handed over) to the partition's loop, which
	// applies them, when the committer could not apply one at once
	// (tryAppendDone: the partition was busy, or an earlier report still
	// waits here). At most maxInflight batches are in flight, so a send
	// never blocks.
	results chan appendResult
	// sent counts the results sent on results and not applied yet: the
	// committer applies a result itself only when none is (see
	// tryAppendDone), so that a partition's results apply in order.
	sent     atomic.Int32
	loadedCh chan loadResult
	loaded   chan struct{} // closed once the first load ends (or if unowned)

	mu     sync.Mutex // guards everything below
	closed bool       // the coordinator is closing: NOT_COORDINATOR
	// deletedTopics are topics deleted from the catalog whose offsets the
	// shard has not removed yet: kept while the partition loads, dropped
	// when it is not served here (its owner removes them).
	deletedTopics []string
	state         partitionState
	shard         *group.Shard
	shardGen      uint64 // bumped on every (re)load/unload so stale results are ignored

	nextTicket group.Ticket
	waiting    map[group.Ticket]*call
	out        group.Output

	// Group commit: writes wait in queued while the partition has
	// maxInflight batches in flight and go out together as the next batch.
	inflight int // batches handed to the writer/committer, not yet done
	queued   []group.Write
	// inCall is set while a request's call runs its turn: a batch it queues
	// for the committer sets needKick, and the caller takes the committer
	// role once it has released mu (Coordinator.kick).
	inCall, needKick bool
	batches          chan batch

	// Regex matchings the shard left to the runtime (group.RegexJob), run
	// one at a time off the partition's lock (resolveTurn); resolving is
	// set while the partition is in the node's regex runner's queue or has
	// its turn.
	regexJobs []group.RegexJob
	resolving bool

	timer   clock.Timer
	armed   bool      // timer is set, for armedAt
	armedAt time.Time // the shard deadline the timer is set for

	// A load that failed is tried again after a pause (the partition
	// answers COORDINATOR_LOAD_IN_PROGRESS meanwhile): reloadTimer fires
	// for the load of generation reloadGen; loadFailures sets the pause.
	reloadTimer  clock.Timer
	reloadGen    uint64
	loadFailures int
	// panics counts the shard's panics (bugs) on this partition; each
	// reloads it from the store (shardPanicked), after a pause that grows
	// with the count. reloadAfterDrain defers that reload until the
	// batches in flight are done, so that the load sees them.
	panics           int
	reloadAfterDrain bool

	// late holds unloaded shards, by generation, that await the outcome
	// of writes they had in flight holding rebalance events
	// (group.Shard.LateWrites): their batches' results are reported to
	// them, so that this node, which coordinated those rebalances,
	// counts them once they are durable. Dropped once every batch of
	// their generation has reported.
	late map[uint64]*group.Shard

	// ownerToken is the store's token of the ownership the shard was
	// loaded under (store.OwnerTokens; 0 without one): every batch
	// carries it, so that a fenced store refuses a batch of an earlier
	// ownership written after the partition came back to this node.
	ownerToken int64
}

func newPartition(c *Coordinator, id int32) *partition {
	timer := c.clock.NewTimer(time.Hour)
	timer.Stop()
	return &partition{
		timer:    timer,
		c:        c,
		id:       id,
		ctls:     make(chan ctl, 4),
		drained:  make(chan struct{}),
		results:  make(chan appendResult, maxInflight),
		loadedCh: make(chan loadResult, 1),
		loaded:   make(chan struct{}),
		waiting:  make(map[group.Ticket]*call),
		batches:  make(chan batch, 1),
	}
}

// acquire starts loading the partition unless it is served or loading
// already (Coordinator.Acquire).
func (p *partition) acquire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.c.ctx.Err() != nil || p.state != stUnowned {
		return
	}
	p.startLoad()
	p.flush()
}

// release stops serving the partition (Coordinator.Release): everything
// parked is answered NOT_COORDINATOR before it returns.
func (p *partition) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return // the loop's exit unloaded it
	}
	p.unload()
	p.flush()
}

func (p *partition) control(x ctl) {
	select {
	case p.ctls <- x:
	case <-p.c.ctx.Done():
	}
}

// call runs a request against the partition on the caller's goroutine and
// waits for its response: at once for most requests, after the store has
// made its records durable for writes, or when the group answers a parked
// JoinGroup or SyncGroup.
func (p *partition) call(ctx context.Context, cl group.Client, req kmsg.Request) (kmsg.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cc := callPool.Get().(*call)
	cc.cl, cc.req = cl, req
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cc.release()
		return group.ErrorResponse(req, group.ErrNotCoordinator), nil
	}
	p.inCall = true
	if p.deletedTopics != nil && p.state == stActive {
		// Topics deleted before this request came: their offsets go
		// first, as the loop's turn on the deletion (still to come)
		// would have removed them had it run. Left to that turn, a
		// commit of this request to a topic of the same name (created
		// again) would be removed after it was acknowledged.
		p.removeDeletedTopics()
	}
	resp, answered := p.dispatchGuarded(cc)
	p.flush()
	kick := p.needKick
	p.inCall, p.needKick = false, false
	p.mu.Unlock()
	if kick {
		// Our turn queued a batch while nobody held the committer role:
		// write it on this goroutine (the reply is then usually ready).
		p.c.kick()
	}
	if answered { // cc was never handed to the partition
		cc.release()
		return resp, nil
	}
	select {
	case r := <-cc.done:
		// Answered: the partition holds no reference to cc any more
		// (it forgets a call before answering it).
		cc.release()
		return r, nil
	case <-ctx.Done():
		// cc may still be answered later: it is not reused.
		return nil, ctx.Err()
	}
}

// callPool recycles answered calls and their channels: two allocations less
// per request.
var callPool = sync.Pool{New: func() any { return &call{done: make(chan kmsg.Response, 1)} }}

func (cc *call) release() {
	cc.cl, cc.req = group.Client{}, nil
	callPool.Put(cc)
}

// pending is the number of requests the partition holds unanswered (tests).
func (p *partition) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiting)
}

// run is the partition's loop. An owned partition is already loading
// (Coordinator.Start begins the load before the loop starts, so that a
// request arriving first is answered COORDINATOR_LOAD_IN_PROGRESS, not
// NOT_COORDINATOR).
func (p *partition) run(owned bool) {
	defer p.c.wg.Done()
	retention := p.c.clock.NewTimer(p.c.cfg.RetentionCheckInterval)
	p.mu.Lock()
	p.reloadTimer = p.c.clock.NewTimer(time.Hour)
	p.reloadTimer.Stop()
	p.mu.Unlock()
	writerDone := make(chan struct{})
	if p.c.multi == nil {
		go p.writer(writerDone)
	} else {
		close(writerDone)
	}
	if !owned {
		close(p.loaded)
	}
	defer func() {
		p.mu.Lock()
		p.closed = true
		p.unload()
		close(p.batches)
		p.timer.Stop()
		if p.inflight == 0 {
			close(p.drained)
		}
		p.mu.Unlock()
		<-writerDone
		// The writer or committer finishes our batches before Close
		// returns; the committer's reports still come through results.
		for {
			select {
			case <-p.drained:
				retention.Stop()
				p.reloadTimer.Stop()
				return
			case res := <-p.results:
				p.resultDone(res)
			}
		}
	}()
	for {
		select {
		case <-p.c.ctx.Done():
			return
		case <-p.timer.C():
			p.mu.Lock()
			p.armed = false
			if p.state == stActive {
				p.safely("timer", func() { p.shard.Tick(p.c.clock.Now(), &p.out) })
			}
		case <-retention.C():
			p.mu.Lock()
			if p.state == stActive {
				p.safely("offset expiry", func() { p.shard.ExpireOffsets(p.c.clock.Now(), &p.out) })
			}
			retention.Reset(p.c.cfg.RetentionCheckInterval)
		case res := <-p.results:
			p.resultDone(res)
			continue
		case lr := <-p.loadedCh:
			p.mu.Lock()
			p.finishLoad(lr)
		case <-p.reloadTimer.C():
			p.mu.Lock()
			if p.state == stLoading && p.shardGen == p.reloadGen {
				p.startLoad()
			}
		case x := <-p.ctls:
			if ctlHook != nil {
				ctlHook(p.id, x)
			}
			p.mu.Lock()
			switch x {
			case ctlTopicsDeleted:
				p.removeDeletedTopics()
			}
		}
		p.flush()
		p.mu.Unlock()
	}
}

// appendDone applies the result of one of the partition's batches (called
// by the writer, or by the loop for the committer's results, in the order
// the batches were handed over): the shard releases the replies that waited
// for it, and the partition hands over its next batch.
func (p *partition) appendDone(res appendResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.appendDoneLocked(res)
}

// resultDone is appendDone for a result that came through p.results.
func (p *partition) resultDone(res appendResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.appendDoneLocked(res)
	p.sent.Add(-1)
}

// tryAppendDone applies res on the caller's goroutine (the committer's) if
// the partition is free at this moment and no earlier result of it waits in
// p.results; false if it did not, and the caller sends res to the loop.
// Applying at once saves a hand-off: the woken loop would wait for a core
// behind every runnable connection goroutine before it could release its
// replies, which a trace of durable commits on two busy cores showed as
// most of the scheduler delay of the commit path.
func (p *partition) tryAppendDone(res appendResult) bool {
	if !p.mu.TryLock() {
		return false
	}
	defer p.mu.Unlock()
	if p.sent.Load() != 0 {
		return false
	}
	p.appendDoneLocked(res)
	return true
}

func (p *partition) appendDoneLocked(res appendResult) {
	p.inflight--
	if res.gen == p.shardGen && p.state == stActive {
		now := p.c.clock.Now()
		p.safely("write done", func() {
			for _, w := range res.writes {
				p.shard.WriteDone(now, w.ID, res.code, &p.out)
			}
		})
	} else if s := p.late[res.gen]; s != nil {
		p.lateDone(s, res)
	}
	p.dropLate(res.gen)
	if len(p.queued) == 0 && cap(res.writes) > cap(p.queued) {
		// Nothing reads the batch any more: its slice takes the next
		// turn's writes (one allocation less per batch).
		clear(res.writes)
		p.queued = res.writes[:0]
	}
	p.flush()
	if p.state == stActive && !p.closed && p.inflight == 0 && p.shard.NeedsReload() {
		// A write failed after the shard had applied its records (a
		// consumer group changes that way): what the shard shows is
		// ahead of the store. Reload the partition from the store;
		// clients see COORDINATOR_LOAD_IN_PROGRESS meanwhile and retry.
		p.c.log.Warn("coordinator: a failed write left the partition ahead of the store; reloading it", "partition", p.id)
		p.unload()
		p.startLoad()
	}
	p.reloadWhenDrained()
	if p.closed && p.inflight == 0 {
		close(p.drained)
	}
}

// lateDone reports the result of a batch of the unloaded shard s (p.late)
// to it. p.mu is held.
func (p *partition) lateDone(s *group.Shard, res appendResult) {
	defer func() {
		if r := recover(); r != nil { // a bug: the shard is gone already
			p.c.log.Error("BUG: panic in the group coordinator reporting a write after an unload",
				"partition", p.id, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			delete(p.late, res.gen)
		}
	}()
	var out group.Output // its requests were answered at the unload
	now := p.c.clock.Now()
	for _, w := range res.writes {
		s.WriteDone(now, w.ID, res.code, &out)
	}
}

// dropLate drops the unloaded shards (p.late) that no result can reach any
// more, once the result of a batch of generation gen is applied: results
// come in hand-over order, so a result of a later generation, or none left
// in flight, means every batch of an earlier one has reported (those of its
// writes that were still queued at the unload were never handed over, and
// report nothing). It runs after every result, the current generation's
// included: once the partition is served again, the batch that reports
// last can be the new shard's, and a shard still counting a write that was
// queued at the unload was then kept for as long as the partition stayed
// served. p.mu is held.
func (p *partition) dropLate(gen uint64) {
	for g, s := range p.late {
		if g < gen || p.inflight == 0 || s.LateWrites() == 0 {
			delete(p.late, g)
		}
	}
}

// dispatch runs one request against the shard (or answers it with the
// partition's state error). A request the shard answers in the same turn
// (heartbeats, fetches, describes, errors) is answered here, without
// parking its caller; any other waits in p.waiting for its reply (a flush
// hands it over).
func (p *partition) dispatch(cc *call) (resp kmsg.Response, answered bool) {
	switch p.state {
	case stUnowned:
		return group.ErrorResponse(cc.req, group.ErrNotCoordinator), true
	case stLoading:
		return loadingResponse(cc.req), true
	}
	p.nextTicket++
	t := p.nextTicket
	if dispatchHook != nil {
		dispatchHook(cc.req)
	}
	if !p.shard.Handle(p.c.clock.Now(), t, cc.cl, cc.req, &p.out) {
		return group.ErrorResponse(cc.req, group.ErrInvalidRequest), true
	}
	for i, r := range p.out.Replies {
		if r.Ticket == t {
			p.out.Replies = slices.Delete(p.out.Replies, i, i+1)
			return r.Resp, true
		}
	}
	p.waiting[t] = cc
	return nil, false
}

// ctlHook, when set (tests only), runs on the partition's loop when it takes
// a control message, before it takes the partition's mutex: a test blocks it
// to stand for a loop that has not been scheduled yet (a busy machine).
var ctlHook func(p int32, x ctl)

// dispatchHook, when set (tests only), runs before the shard handles each
// request: a test panics in it to stand for a bug of the shard.
var dispatchHook func(kmsg.Request)

// dispatchGuarded is dispatch, with a panic of the shard (a bug) turned into
// a reload of the partition (shardPanicked) and a loading answer: without it
// the panic unwound past the caller with the partition's mutex held, and
// every group of the partition hung until the node restarted.
func (p *partition) dispatchGuarded(cc *call) (resp kmsg.Response, answered bool) {
	defer func() {
		if r := recover(); r != nil {
			p.shardPanicked("request "+kmsg.NameForKey(cc.req.Key()), r)
			resp, answered = loadingResponse(cc.req), true
		}
	}()
	return p.dispatch(cc)
}

// safely runs fn, one of the loop's turns on the shard, with a panic of the
// shard turned into a reload (shardPanicked). p.mu is held.
func (p *partition) safely(what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			p.shardPanicked(what, r)
		}
	}()
	fn()
}

// shardPanicked handles a panic of the shard, which is a bug: its state may
// be half changed, so it is dropped with the turn's replies and writes
// (nothing of them was acknowledged), every parked request is answered
// NOT_COORDINATOR (clients retry), and the partition is loaded again from the
// store once its batches in flight are done, answering
// COORDINATOR_LOAD_IN_PROGRESS meanwhile. The pause before the load grows
// with the partition's panics (a load that panics again is not retried in a
// tight loop). p.mu is held.
func (p *partition) shardPanicked(what string, r any) {
	p.panics++
	p.c.log.Error("BUG: panic in the group coordinator; reloading the partition from the store",
		"partition", p.id, "where", what, "panic", fmt.Sprint(r), "panics", p.panics, "stack", string(debug.Stack()))
	p.out.Reset()
	p.state = stUnowned // the shard is not asked to unload: it is suspect
	deleted := p.deletedTopics
	p.unload()
	if p.closed {
		return
	}
	// This node loads the partition again: the topic deletions it heard of
	// are applied to what it loads (unload forgets them for another owner).
	p.deletedTopics = deleted
	p.state = stLoading
	p.reloadAfterDrain = true
	p.reloadWhenDrained()
}

// reloadWhenDrained schedules the reload shardPanicked asked for, once no
// batch of the partition is in flight. p.mu is held.
func (p *partition) reloadWhenDrained() {
	if !p.reloadAfterDrain || p.inflight > 0 || p.closed || p.state != stLoading {
		return
	}
	p.reloadAfterDrain = false
	p.reloadGen = p.shardGen
	p.reloadTimer.Reset(min(loadRetryMin<<min(p.panics-1, 10), loadRetryMax))
}

// loadingResponse is the answer while the partition loads (group.API.Loading).
func loadingResponse(req kmsg.Request) kmsg.Response {
	return group.ErrorResponse(req, group.LookupAPI(req.Key()).Loading)
}

// flush releases the replies of this turn, queues its writes, and re-arms the
// timer for the shard's next deadline. Called with mu held.
func (p *partition) flush() {
	for _, r := range p.out.Replies {
		if cc, ok := p.waiting[r.Ticket]; ok {
			delete(p.waiting, r.Ticket)
			cc.done <- r.Resp
		}
	}
	p.queued = append(p.queued, p.out.Writes...)
	p.out.Reset()
	if p.state == stActive {
		p.regexJobs = append(p.regexJobs, p.shard.TakeRegexJobs()...)
		if len(p.regexJobs) > 0 {
			// Jobs for regexes no member uses any more (or resolved
			// since) are dropped, not run: the queue holds at most one
			// job per regex in use.
			p.regexJobs = slices.DeleteFunc(p.regexJobs, func(j group.RegexJob) bool { return !p.shard.RegexWanted(j) })
		}
		p.resolveNext()
	}
	if !p.closed && p.inflight < p.maxInflight() && len(p.queued) > 0 {
		p.inflight++
		b := batch{writes: p.queued, gen: p.shardGen, owner: p.ownerToken}
		p.queued = nil
		if p.c.multi != nil {
			p.c.enqueue(commitReq{p, b}, p.inCall)
			p.needKick = p.needKick || p.inCall
		} else {
			p.batches <- b
		}
	}
	var at time.Time
	ok := false
	if p.state == stActive {
		at, ok = p.shard.NextDeadline()
	}
	if ok == p.armed && (!ok || at.Equal(p.armedAt)) {
		return // the timer is already set for this deadline (or unset)
	}
	p.timer.Stop()
	p.armed, p.armedAt = ok, at
	if ok {
		p.timer.Reset(max(at.Sub(p.c.clock.Now()), 0))
	}
}

// resolveNext puts the partition in the node's queue of regex matchings
// (regexRunner) if it has jobs queued and is not there already: they run
// off the partition's lock, as Kafka resolves regexes in the background, so
// that a costly regex (a long one over many topics can take seconds) holds
// no request of the partition; one runs at a time on the node, a slice at a
// time (resolveTurn). The result reaches the shard it came from, if it is
// still the partition's. Called with mu held.
func (p *partition) resolveNext() {
	if p.resolving || p.closed || len(p.regexJobs) == 0 {
		return
	}
	p.resolving = true
	p.c.regexes.add(p)
}

// resolveTurn is the partition's turn on the node's regex runner: its first
// queued job still wanted (Shard.RegexWanted: the queue may have waited long
// behind other partitions' matchings) runs a slice at a time
// (group.RegexJob.Step, Coordinator.regexSlice of work each, about 40 ms at
// worst), on until another partition waits for its turn or one of its own
// jobs is queued (goOn). A job left unfinished goes to the back of the
// partition's queue, and the partition to the back of the node's: the
// node's matchings take turns, so that one long regex (a 32 KB program over
// 100,000 topic names of 249 bytes can take hours) holds no other group's
// matching for more than a slice. Between slices the job is dropped if its
// regex is no longer wanted or its shard was unloaded; it goes on with the
// topics it started with (see Step).
func (p *partition) resolveTurn() {
	job, gen, ok := p.nextWantedJob()
	if !ok {
		return
	}
	var res group.RegexResult
	done := false
	for {
		if gate := p.c.resolveGate; gate != nil {
			gate(job)
		}
		if res, done = job.Step(p.c.regexSlice); done || !p.goOn(job, gen) {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resolving = false
	switch {
	case gen != p.shardGen || p.state != stActive:
		// Unloaded meanwhile: the rest of the job goes with the shard.
	case done:
		p.safely("regex resolved", func() { p.shard.RegexResolved(res) })
		if hook := p.c.regexResolvedHook; hook != nil {
			hook(res)
		}
	default:
		// Behind the partition's other jobs; a job whose regex went
		// out of use is dropped there (flush).
		p.regexJobs = append(p.regexJobs, job)
	}
	p.flush()
}

// goOn reports whether job may run its next slice at once: no other
// partition waits for its turn on the node's regex runner, none of its own
// jobs is queued, and its shard still wants it (and is still the
// partition's).
func (p *partition) goOn(job group.RegexJob, gen uint64) bool {
	if p.c.regexes.waiting() > 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed && gen == p.shardGen && p.state == stActive && len(p.regexJobs) == 0 && p.shard.RegexWanted(job)
}

// nextWantedJob takes the first queued job the shard still wants
// (Shard.RegexWanted) from the queue, with the shard's generation; the
// jobs before it are dropped. ok is false, and the partition no longer
// resolving, if there is none. A job queued (and so kept by flush) before
// its regex went out of use would otherwise take the node's runner for
// nothing, while the regexes of every other group of the node, and its own
// member's new one, waited.
func (p *partition) nextWantedJob() (_ group.RegexJob, gen uint64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && p.state == stActive && len(p.regexJobs) > 0 {
		job := p.regexJobs[0]
		p.regexJobs = slices.Delete(p.regexJobs, 0, 1)
		if p.shard.RegexWanted(job) {
			return job, p.shardGen, true
		}
	}
	p.resolving = false
	return group.RegexJob{}, 0, false
}

// writer appends the partition's batches one at a time, in order (stores
// without MultiAppender).
func (p *partition) writer(done chan struct{}) {
	defer close(done)
	for b := range p.batches {
		recs := b.records()
		code := group.ErrNone
		var err error
		if ot, ok := p.c.cfg.Store.(store.OwnerTokens); ok && b.owner != 0 {
			err = ot.AppendOwned(context.Background(), p.id, b.owner, recs)
		} else {
			err = p.c.cfg.Store.Append(context.Background(), p.id, recs)
		}
		if err != nil {
			code = storeErrorCode(err)
			if log, unlogged := p.appendFails.note(p.c.clock.Now()); log {
				p.c.log.Warn("coordinator: append failed", p.c.withHint(err, "partition", p.id, "records", len(recs), "err", err,
					"failed_unlogged", unlogged)...)
			}
		}
		p.appendDone(appendResult{writes: b.writes, code: code, gen: b.gen})
	}
}

// maxInflight bounds the batches a partition has in flight. With a
// per-partition writer it is one (its appends must reach the store in order,
// one at a time). With the cross-partition committer, which writes batches in
// the order it receives them, a partition hands in each turn's writes at once
// (up to this bound) instead of holding them until its previous batch is
// durable, so every round carries everything that arrived during the last
// one. A partition's results channel holds this many, so a report never
// blocks.
const maxInflight = 8

func (p *partition) maxInflight() int {
	if p.c.multi == nil {
		return 1
	}
	return maxInflight
}

// batch is the writes of one or more requests or events, appended together.
type batch struct {
	writes []group.Write
	gen    uint64 // the shard they belong to
	owner  int64  // the store's ownership token of the shard's load (0: none)
}

func (b batch) records() []store.Record { return b.appendRecords(nil) }

// appendRecords appends the batch's records to dst in order.
func (b batch) appendRecords(dst []store.Record) []store.Record {
	for _, w := range b.writes {
		for _, r := range w.Records {
			dst = append(dst, store.Record(r))
		}
	}
	return dst
}

// failureLog bounds the warnings of failed appends to one a minute (of a
// partition, or of the committer's rounds). A store that refuses every
// write for a while (etcd out of space, whose NOSPACE alarm stays until
// an operator disarms it) fails each retry of each client at once: a line
// each made thousands a second, burying the first one, which says why.
// cohort_store_append_errors_total counts them all.
type failureLog struct {
	mu       sync.Mutex
	logged   time.Time // when the last warning was logged (zero: none)
	unlogged int       // failures since, not logged
}

// failureLogEvery is the least time between two warnings of a failureLog.
const failureLogEvery = time.Minute

// note records a failure at now: it reports whether to log it, and how
// many failures went unlogged since the last warning.
func (f *failureLog) note(now time.Time) (log bool, unlogged int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.logged.IsZero() && now.Sub(f.logged) < failureLogEvery {
		f.unlogged++
		return false, 0
	}
	unlogged, f.logged, f.unlogged = f.unlogged, now, 0
	return true, unlogged
}

// storeErrorCode maps a store failure to the Kafka error clients retry on.
func storeErrorCode(err error) int16 {
	if errors.Is(err, store.ErrNotOwner) {
		return group.ErrNotCoordinator
	}
	return group.ErrCoordinatorNotAvailable
}

// The pauses before a failed load is tried again: doubling from
// loadRetryMin up to loadRetryMax.
const (
	loadRetryMin = 100 * time.Millisecond
	loadRetryMax = 10 * time.Second
)

func (p *partition) startLoad() {
	p.state = stLoading
	p.shardGen++
	p.ownerToken = 0
	if ot, ok := p.c.cfg.Store.(store.OwnerTokens); ok {
		p.ownerToken = ot.OwnerToken(p.id)
	}
	gen := p.shardGen
	go func() {
		s := group.NewShard(p.c.cfg.Group, p.c.cfg.Rand)
		s.Logf = func(format string, args ...any) {
			p.c.log.Warn(fmt.Sprintf(format, args...), "partition", p.id)
		}
		if slots := p.c.loadSlots; slots != nil {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-p.c.ctx.Done():
				p.loadedCh <- loadResult{err: p.c.ctx.Err(), gen: gen}
				return
			}
		}
		start := time.Now()
		n := 0
		err := p.c.cfg.Store.Load(p.c.ctx, p.id, func(r store.Record) error {
			n++
			return s.Load(r.Key, r.Value)
		})
		if err == nil {
			p.c.log.Debug("coordinator: partition loaded", "partition", p.id, "records", n, "groups", s.Len(), "took", time.Since(start))
		}
		p.loadedCh <- loadResult{shard: s, err: err, gen: gen}
	}()
}

func (p *partition) finishLoad(lr loadResult) {
	defer func() {
		select {
		case <-p.loaded:
		default:
			close(p.loaded)
		}
	}()
	if lr.gen != p.shardGen || p.state != stLoading {
		return
	}
	if lr.err != nil {
		if p.c.ctx.Err() != nil {
			p.state = stUnowned // closing
			return
		}
		// Still this node's: try again after a pause, answering
		// COORDINATOR_LOAD_IN_PROGRESS meanwhile (clients retry it). One
		// error (an etcd timeout or leader change, a compaction between
		// two pages of the load) made the partition unavailable for as
		// long as this node kept it, while every client was sent here.
		p.loadFailures++
		pause := min(loadRetryMin<<min(p.loadFailures-1, 10), loadRetryMax)
		p.c.log.Error("coordinator: loading partition failed; trying again", p.c.withHint(lr.err, "partition", p.id, "err", lr.err,
			"failures", p.loadFailures, "retry_in", pause)...)
		p.reloadGen = p.shardGen
		p.reloadTimer.Reset(pause)
		return
	}
	p.loadFailures = 0
	p.shard = lr.shard
	p.state = stActive
	p.safely("load", func() { p.shard.FinishLoad(p.c.clock.Now(), &p.out) })
	p.removeDeletedTopics()
}

// removeDeletedTopics removes the offsets of deletedTopics from a served
// shard, keeps them for one that is loading, and forgets them otherwise.
// p.mu is held.
func (p *partition) removeDeletedTopics() {
	switch p.state {
	case stLoading:
		return
	case stActive:
		p.safely("deleted topics", func() { p.shard.DeleteTopicOffsets(p.deletedTopics, &p.out) })
	}
	p.deletedTopics = nil
}

// unload answers everything parked with NOT_COORDINATOR and forgets the
// shard.
func (p *partition) unload() {
	if p.state == stActive {
		p.shard.Unload(p.c.clock.Now(), &p.out)
		if p.shard.LateWrites() > 0 && p.inflight > 0 {
			if p.late == nil {
				p.late = map[uint64]*group.Shard{}
			}
			p.late[p.shardGen] = p.shard
		}
	}
	if p.shard != nil && p.c.cfg.OnUnload != nil {
		p.c.cfg.OnUnload(p.id)
	}
	p.state = stUnowned
	p.shardGen++
	p.loadFailures = 0
	p.reloadAfterDrain = false
	p.shard = nil
	p.deletedTopics = nil // whoever serves it next heard of them
	for _, r := range p.out.Replies {
		if cc, ok := p.waiting[r.Ticket]; ok {
			delete(p.waiting, r.Ticket)
			cc.done <- r.Resp
		}
	}
	for t, cc := range p.waiting {
		delete(p.waiting, t)
		cc.done <- group.ErrorResponse(cc.req, group.ErrNotCoordinator)
	}
	p.out.Reset()
	p.queued = nil
	p.regexJobs = nil // a matching under way is dropped when it ends (shardGen)
}

// shardForTest returns the partition's shard; only for tests that inspect
// state after the loops have stopped or while nothing else runs.
func (p *partition) shardForTest() *group.Shard { return p.shard }
