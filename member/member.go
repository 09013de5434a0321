// Package member is a client for Kafka's classic group membership protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for any protocol type. It is
// the building block of cohort's recipes: the consumer group client, single
// writer election and worker pools all use it, and so can any service that
// needs "these processes form a group and one of them decides who does what".
//
// The caller supplies the protocol: its type, the protocols it supports in
// order of preference with this member's metadata, and the function the
// leader runs to turn every member's metadata into every member's assignment.
// Member does the rest: coordinator discovery and retries, the
// MEMBER_ID_REQUIRED round trip, the leader's assignment and SyncGroup, a
// heartbeat loop that runs independently of the caller's work, rejoining on
// REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID, static
// membership, and LeaveGroup on Close.
//
// # Work, revocation and loss
//
// Each successful SyncGroup is reported to Config.Assigned together with a
// context. That context is cancelled when the work must stop:
//
//   - eager protocols (Config.Cooperative false): when a rebalance starts;
//     Config.Revoked is then called and the member rejoins only after it
//     returns, so the caller can finish cleanly (commit, flush, release);
//   - cooperative protocols: the context outlives rebalances, because the
//     caller keeps what it is still assigned; the caller stops what the new
//     assignment no longer contains and calls Rejoin (KIP-429);
//   - always: when membership is lost (Config.Lost) and on Close.
//
// Loss is detected locally. The coordinator removes a member whose session
// timeout elapses without a heartbeat, and then hands its work to others.
// Member measures from the moment it sent the last request that the
// coordinator confirmed: when no confirmation has arrived for the session
// timeout less Config.LostMargin, it cancels the work context before the
// coordinator can have removed it. It also watches the rebalance timeout,
// after which the coordinator drops members that have not rejoined: while it
// rejoins, and, for a dynamic member, also before it has heard of a
// rebalance, counted from its last confirmed heartbeat (a rebalance may have
// begun right after it), which matters when RebalanceTimeout is shorter than
// SessionTimeout. This is what makes the generation a usable fencing
// token: a process that cannot reach the coordinator stops on its own before
// a successor can start.
//
// Times (heartbeat schedule, retry backoff, the lost watchdog) come from
// Config.Clock, which a test can set to a clock.Fake (package
// github.com/cohort-dev/cohort/clock) to check these rules deterministically.
package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/clock"
)

// Requester sends one Kafka request and returns its response. *kgo.Client
// implements it and routes group requests to the group's coordinator
// (FindCoordinator, with retries when the coordinator moves or is loading).
// Tests wrap it to drop or delay requests.
type Requester interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Protocol is one protocol a member supports, with the member's metadata for
// it (JoinGroup's protocols array).
type Protocol struct {
	Name     string
	Metadata []byte
}

// GroupMember is one member of a generation as the leader sees it.
type GroupMember struct {
	ID         string
	InstanceID string // "" for dynamic members
	Metadata   []byte // the metadata of the chosen protocol
}

// Generation describes one generation of the group as this member sees it.
type Generation struct {
	// ID is the generation id. It only grows for a group (while the group
	// exists on the coordinator: an empty group without committed offsets
	// is removed at the coordinator's next expiry check, and a new one
	// starts again at 1; cohort keeps the recipes' groups, of protocol type
	// election and workers, for the offsets retention), so it is a fencing
	// token: work started in generation n must be refused by a resource
	// that has seen n+1.
	ID         int32
	MemberID   string
	InstanceID string
	// Protocol is the protocol the coordinator chose.
	Protocol string
	LeaderID string
	// Leader reports whether this member leads the generation.
	Leader bool
	// Members lists every member with its metadata; only the leader has it.
	Members []GroupMember
	// Assignment is what the leader assigned to this member.
	Assignment []byte
}

// Config configures a Member. Group, ProtocolType, Protocols and Assign are
// required, as is either Client or Brokers.
type Config struct {
	// Client sends the requests. The member does not close it. If nil, the
	// member creates a kgo client for Brokers and closes it on Close.
	Client Requester
	// Brokers are the seed addresses used when Client is nil.
	Brokers []string
	// ClientOpts are more kgo options for the client created from Brokers
	// (ignored with Client): above all TLS and SASL, from
	// clientconfig.Config.Opts in package security/clientconfig. They come
	// after NewClient's own options and so may override them.
	ClientOpts []kgo.Opt

	// Group is the group id; the processes that give the same one form the
	// group.
	Group string
	// ProtocolType is JoinGroup's protocol type ("consumer" for Kafka
	// consumers); the coordinator refuses a member whose type differs from
	// the group's (INCONSISTENT_GROUP_PROTOCOL). election and workers set
	// it, Protocols and Assign themselves.
	ProtocolType string
	// Protocols is called before every JoinGroup and returns the supported
	// protocols, most preferred first, each with this member's current
	// metadata (so that it can carry what the member owns now).
	Protocols func() []Protocol
	// Assign runs on the leader of each generation: g.Members holds every
	// member's metadata for g.Protocol. It returns each member's assignment;
	// members left out get an empty one.
	Assign func(ctx context.Context, g Generation) (map[string][]byte, error)

	// Assigned is called after each successful SyncGroup. ctx is cancelled
	// (with a cause: ErrRevoked, ErrSessionLost, ErrClosed, ...) when the
	// work must stop; see the package documentation. Callbacks are called
	// one at a time from the member's goroutine; heartbeats continue while
	// they run, but a callback that outlasts the rebalance timeout delays
	// rejoining and costs the membership. Start work and return.
	Assigned func(ctx context.Context, g Generation)
	// Revoked is called before rejoining (eager protocols only) and on
	// Close, after the work context was cancelled. The member rejoins or
	// leaves when it returns, so the caller may finish cleanly here.
	Revoked func(g Generation)
	// Lost is called after membership was lost (locally detected, fenced
	// or removed by the coordinator, or Abandon). The work context is
	// already cancelled; stop at once. The member then rejoins afresh.
	Lost func(g Generation, err error)

	// Cooperative selects the cooperative rebalance style: the member does
	// not revoke before rejoining, and work contexts survive rebalances.
	Cooperative bool
	// FinishRebalanceOnClose makes Close let a rebalance under way
	// complete before it revokes and leaves, when the member holds its
	// work through it (cooperative) and its JoinGroup or SyncGroup is
	// under way or its Assign runs: the coordinator refuses commits while
	// it waits for the leader's assignment, and accepts them again in the
	// new generation. Close then waits, no new join is sent, and once the
	// member has synced, the work context is cancelled and Revoked called
	// with the new generation (Assigned is not called for it); it waits
	// at most half the time its context leaves it, so that Revoked and
	// the LeaveGroup have the rest, and then abandons the join or sync as
	// without the option. Until then the work context stays live and the
	// lost watchdog runs (Lost instead of Revoked if it fires). A failed
	// join, Assign or sync ends the wait too.
	FinishRebalanceOnClose bool

	// InstanceID enables static membership (KIP-345): the member keeps its
	// identity across restarts and does not send LeaveGroup on Close. A
	// process joining with the instance id of a member still in the group
	// replaces it without a rebalance and is handed that member's
	// assignment, for the same generation, while the replaced process may
	// still act on it until it learns it was fenced: a recipe that uses the
	// generation as a fencing token must not accept an assignment made for
	// another member id (election and workers refuse it and rejoin).
	InstanceID string
	// SessionTimeout (default 10s), RebalanceTimeout (default 30s) and
	// HeartbeatInterval (default a third of the shorter of the two) are
	// the usual settings. A dynamic member whose rebalance timeout is
	// shorter than its session stops its work on its own within that
	// shorter time (see the package documentation), so HeartbeatInterval
	// must be well below both, less LostMargin.
	SessionTimeout    time.Duration
	RebalanceTimeout  time.Duration
	HeartbeatInterval time.Duration
	// LostMargin is how long before the coordinator could expire the
	// session the member declares itself lost (default a fifth of the
	// shorter of SessionTimeout and RebalanceTimeout).
	// It must cover the time the caller needs to stop its work.
	LostMargin time.Duration
	// RetryBackoff is the first backoff after a failed join (default
	// 100ms); it doubles up to MaxRetryBackoff (default 2s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration

	// Clock gives the time and the timers: the heartbeat schedule, the
	// retry backoff and the lost watchdog (nil: clock.Real, the system
	// clock). Tests set a *clock.Fake to run these steps only when they
	// move the clock; see the package clock.
	Clock clock.Clock
	// Logger receives the member's log lines, each with the group id
	// (nil: slog.Default()).
	Logger *slog.Logger
}

// Errors passed as context causes and to Lost.
var (
	// ErrClosed: the member was closed.
	ErrClosed = errors.New("member: closed")
	// ErrAbandoned: the member was stopped with Abandon.
	ErrAbandoned = errors.New("member: abandoned")
	// ErrRevoked: an eager rebalance started; the assignment is revoked.
	ErrRevoked = errors.New("member: assignment revoked by a rebalance")
	// ErrSessionLost: no request was confirmed by the coordinator within the
	// session (or rebalance) timeout less the margin; the coordinator may
	// already have removed this member.
	ErrSessionLost = errors.New("member: session presumed lost (no confirmed heartbeat in time)")
)

// FatalError is returned by Err when the member stopped because the
// coordinator refused it in a way retrying cannot fix (for example
// FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED),
// or refused its credentials or certificate (SASL_AUTHENTICATION_FAILED,
// a failed TLS handshake) or its use of the group (GROUP_AUTHORIZATION_FAILED,
// also when the group's ACL is removed while it runs). Err wraps the kerr
// error where there is one; the password is never part of it.
type FatalError struct {
	Request string
	Err     error
}

func (e *FatalError) Error() string { return fmt.Sprintf("member: %s: %v", e.Request, e.Err) }
func (e *FatalError) Unwrap() error { return e.Err }

// Member is one running group member. Create it with Start. It is a small
// loop around a Machine: it sends the machine's requests (each on its own
// goroutine, bounded by the request's timeout), runs the callbacks one at a
// time on one goroutine, cancels work contexts, arms one timer for the next
// deadline and feeds every result back into the machine.
type Member struct {
	cfg Config
	cl  Requester
	own *kgo.Client
	clk clock.Clock
	// ctx is cancelled by Close (once it no longer waits for a rebalance)
	// and Abandon: it aborts joins, syncs and Assign.
	ctx  context.Context
	stop context.CancelFunc

	closeReq chan struct{} // closed by the first Close or Abandon
	wake     chan struct{} // a user call changed the machine
	results  chan result
	done     chan struct{} // closed when the member has stopped
	closeMu  sync.Mutex
	closing  bool
	abandon  bool
	// leaveCtx bounds the LeaveGroup (Close's context).
	leaveCtx context.Context

	mu sync.Mutex
	mc *Machine
	// works are the work contexts not yet done with (guarded by mu): a
	// context is dropped once it is cancelled and no Assigned callback
	// queued with it is left to run, so that a member that rebalances for
	// months does not keep one per generation.
	works map[uint64]*work
}

// work is a work context and what keeps it in Member.works.
type work struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	queued int  // Assigned callbacks with this context not yet returned
	ended  bool // cancelled
}

// result is a response or a callback's return, for the loop.
type result struct {
	callback    bool
	id          uint64
	resp        kmsg.Response
	assignments map[string][]byte
	err         error
}

// Start validates cfg and starts the member in the background. It returns at
// once; Assigned reports the first generation.
func Start(cfg Config) (*Member, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	mc, err := NewMachine(cfg, cfg.Clock.Now(), rand.Uint64())
	if err != nil {
		return nil, err
	}
	m := &Member{
		cfg:      mc.cfg,
		clk:      cfg.Clock,
		mc:       mc,
		works:    map[uint64]*work{},
		closeReq: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		results:  make(chan result, 16),
		done:     make(chan struct{}),
	}
	m.cl = cfg.Client
	if m.cl == nil {
		if len(cfg.Brokers) == 0 {
			return nil, errors.New("member: Client or Brokers is required")
		}
		cl, err := NewClient(cfg.Brokers, cfg.ClientOpts...)
		if err != nil {
			return nil, err
		}
		m.cl, m.own = cl, cl
	}
	m.ctx, m.stop = context.WithCancel(context.Background())
	go m.run()
	return m, nil
}

// NewClient returns a kgo client suited to group membership: short retry
// backoffs, so that a moved or restarted coordinator is found again quickly.
// opts follow these defaults (Config.ClientOpts: TLS, SASL, ...).
func NewClient(brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			return min(50*time.Millisecond<<min(tries, 5), time.Second)
		}),
		kgo.DialTimeout(5 * time.Second),
	}
	return kgo.NewClient(append(base, opts...)...)
}

// Generation returns the current generation and true while the member is
// synced and not rebalancing.
func (m *Member) Generation() (Generation, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mc.Generation()
}

// Rejoin asks for a rebalance: the member rejoins the group (cooperative
// recipes call it after stopping revoked work). It does nothing while the
// member is already rejoining.
func (m *Member) Rejoin() {
	m.mu.Lock()
	m.mc.Rejoin(m.clk.Now())
	m.mu.Unlock()
	m.poke()
}

// Done is closed when the member has stopped (Close, Abandon or a fatal
// error).
func (m *Member) Done() <-chan struct{} { return m.done }

// Err returns the fatal error that stopped the member, if any.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mc.Err()
}

// Close stops the member gracefully: the work context is cancelled, Revoked is
// called, and a dynamic member sends LeaveGroup so the group rebalances at
// once (a static member does not: its instance id keeps its place until the
// session timeout). With Config.FinishRebalanceOnClose, a rebalance under
// way may complete first, for at most half the time ctx leaves (see there).
// ctx bounds the LeaveGroup and how long Close waits; when ctx ends first,
// Close returns its error and the member still stops, its LeaveGroup sent
// once the callbacks under way return (bounded by the request's own
// timeout).
func (m *Member) Close(ctx context.Context) error {
	m.closeMu.Lock()
	if !m.closing {
		m.closing = true
		m.leaveCtx = ctx
		close(m.closeReq)
		if m.cfg.FinishRebalanceOnClose {
			go m.endRebalanceWait(ctx)
		} else {
			m.stop()
		}
	}
	m.closeMu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// endRebalanceWait ends Close's wait for a rebalance under way
// (Config.FinishRebalanceOnClose) when half the time ctx left Close has
// passed, or ctx ends: it aborts the join, sync or Assign, and the loop
// tells the machine to close now.
func (m *Member) endRebalanceWait(ctx context.Context) {
	wait, cancel := rebalanceWait(ctx)
	defer cancel()
	select {
	case <-wait.Done():
	case <-m.done:
	case <-m.ctx.Done(): // Abandon
	}
	m.stop()
}

// rebalanceWait is the part of Close's context a rebalance under way may
// take: half the time to its deadline (all of it when it has none).
func rebalanceWait(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(d)/2)
}

// Abandon stops the member the way a crash would: the work context is
// cancelled and Lost is called, but no LeaveGroup is sent, so the coordinator
// notices only when the session times out. It returns when the member has
// stopped. After Close it only ends Close's wait for a rebalance and waits
// for the member to stop.
func (m *Member) Abandon() {
	m.closeMu.Lock()
	if !m.closing {
		m.closing = true
		m.abandon = true
		close(m.closeReq)
	}
	m.closeMu.Unlock()
	m.stop()
	<-m.done
}

func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run is the I/O loop around the machine.
func (m *Member) run() {
	stopped := make(chan struct{}) // tells senders the loop is gone
	defer func() {
		close(stopped)
		if m.own != nil {
			m.own.Close()
		}
		close(m.done)
	}()
	queue := make(chan Callback, 64)
	var backlog []Callback // callbacks not yet handed to the queue
	go m.callbacks(queue, stopped)
	var timer clock.Timer
	closeReq, aborted := m.closeReq, m.ctx.Done()
	for {
		m.mu.Lock()
		rd := m.mc.Ready()
		done := m.mc.Done()
		m.mu.Unlock()
		for _, cb := range rd.Callbacks {
			if cb.Kind == CallAssigned {
				m.mu.Lock()
				w := m.works[cb.Work]
				if w == nil {
					w = &work{}
					w.ctx, w.cancel = context.WithCancelCause(context.Background())
					m.works[cb.Work] = w
				}
				w.queued++
				m.mu.Unlock()
			}
		}
		for _, c := range rd.Cancels {
			m.mu.Lock()
			w := m.works[c.Work]
			if w != nil && !w.ended {
				w.ended = true
				if w.queued == 0 {
					delete(m.works, c.Work)
				}
			} else {
				w = nil
			}
			m.mu.Unlock()
			if w != nil {
				w.cancel(c.Cause)
			}
		}
		for _, r := range rd.Requests {
			go m.send(r, stopped)
		}
		backlog = append(backlog, rd.Callbacks...)
		for len(backlog) > 0 {
			select {
			case queue <- backlog[0]:
				backlog = backlog[1:]
				continue
			default:
			}
			break
		}
		if done {
			close(queue)
			return
		}
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		var tc <-chan time.Time
		if !rd.Deadline.IsZero() {
			timer = m.clk.NewTimer(max(rd.Deadline.Sub(m.clk.Now()), 0))
			tc = timer.C()
		}
		var qc chan Callback
		var next Callback
		if len(backlog) > 0 {
			qc, next = queue, backlog[0]
		}
		select {
		case r := <-m.results:
			m.mu.Lock()
			if r.callback {
				m.mc.CallbackDone(m.clk.Now(), r.id, r.assignments, r.err)
			} else {
				m.mc.Step(m.clk.Now(), r.id, r.resp, r.err)
			}
			m.mu.Unlock()
		case <-tc:
			m.mu.Lock()
			m.mc.Tick(m.clk.Now())
			m.mu.Unlock()
		case <-m.wake:
		case qc <- next:
			backlog = backlog[1:]
		case <-closeReq:
			closeReq = nil
			m.stopMachine(m.mc.Close)
		case <-aborted:
			// Close no longer waits for a rebalance (or Abandon).
			aborted = nil
			m.stopMachine(m.mc.CloseNow)
		}
	}
}

// send sends one request and reports its response to the loop.
func (m *Member) send(r Request, stopped chan struct{}) {
	parent := context.Background()
	switch r.Kind {
	case JoinGroup, SyncGroup:
		parent = m.ctx
	case LeaveGroup:
		// Bounded by Close's context, unless that ended before the
		// LeaveGroup could go (a callback took longer): then by the
		// request's own timeout, so that the others rebalance at once
		// instead of waiting for this member's session to expire.
		m.closeMu.Lock()
		if m.leaveCtx != nil && m.leaveCtx.Err() == nil {
			parent = m.leaveCtx
		}
		m.closeMu.Unlock()
	}
	if jr, ok := r.Req.(*kmsg.JoinGroupRequest); ok {
		for _, p := range m.cfg.Protocols() {
			jp := kmsg.NewJoinGroupRequestProtocol()
			jp.Name, jp.Metadata = p.Name, p.Metadata
			jr.Protocols = append(jr.Protocols, jp)
		}
	}
	ctx, cancel := context.WithTimeout(parent, r.Timeout)
	defer cancel()
	resp, err := m.cl.Request(ctx, r.Req)
	select {
	case m.results <- result{id: r.ID, resp: resp, err: err}:
	case <-stopped:
	}
}

// callbacks runs the user's callbacks one at a time.
func (m *Member) callbacks(queue <-chan Callback, stopped chan struct{}) {
	for cb := range queue {
		res := result{callback: true, id: cb.ID}
		switch cb.Kind {
		case CallAssign:
			ctx, cancel := context.WithTimeout(m.ctx, m.cfg.RebalanceTimeout)
			res.assignments, res.err = m.cfg.Assign(ctx, cb.Gen)
			cancel()
		case CallAssigned:
			m.mu.Lock()
			w := m.works[cb.Work]
			m.mu.Unlock()
			if m.cfg.Assigned != nil {
				m.cfg.Assigned(w.ctx, cb.Gen)
			}
			m.mu.Lock()
			if w.queued--; w.queued == 0 && w.ended {
				delete(m.works, cb.Work)
			}
			m.mu.Unlock()
		case CallRevoked:
			if m.cfg.Revoked != nil {
				m.cfg.Revoked(cb.Gen)
			}
		case CallLost:
			m.mc.log.Warn("membership lost", "generation", cb.Gen.ID, "member", cb.Gen.MemberID, "err", cb.Err)
			if m.cfg.Lost != nil {
				m.cfg.Lost(cb.Gen, cb.Err)
			}
		}
		select {
		case m.results <- res:
		case <-stopped:
			return
		}
	}
}

// stopMachine tells the machine that the member stops: Abandon if Abandon
// was called, otherwise close (Machine.Close or CloseNow).
func (m *Member) stopMachine(close func(time.Time)) {
	m.closeMu.Lock()
	abandon := m.abandon
	m.closeMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if abandon {
		m.mc.Abandon(m.clk.Now())
	} else {
		close(m.clk.Now())
	}
}
