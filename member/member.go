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
// coordinator can have removed it. While it rejoins during a rebalance it also
// watches the rebalance timeout, after which the coordinator drops members
// that have not rejoined. This is what makes the generation a usable fencing
// token: a process that cannot reach the coordinator stops on its own before
// a successor can start.
//
// Times (heartbeat schedule, retry backoff, the lost watchdog) come from an
// injectable clock so that these rules can be tested deterministically.
package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/internal/clock"
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
	// exists on the coordinator), so it is a fencing token: work started in
	// generation n must be refused by a resource that has seen n+1.
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

	Group        string
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

	// InstanceID enables static membership (KIP-345): the member keeps its
	// identity across restarts and does not send LeaveGroup on Close.
	InstanceID string
	// SessionTimeout (default 10s), RebalanceTimeout (default 30s) and
	// HeartbeatInterval (default SessionTimeout/3) are the usual settings.
	SessionTimeout    time.Duration
	RebalanceTimeout  time.Duration
	HeartbeatInterval time.Duration
	// LostMargin is how long before the coordinator could expire the
	// session the member declares itself lost (default SessionTimeout/5).
	// It must cover the time the caller needs to stop its work.
	LostMargin time.Duration
	// RetryBackoff is the first backoff after a failed join (default
	// 100ms); it doubles up to MaxRetryBackoff (default 2s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration

	Clock  clock.Clock
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
// FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED).
type FatalError struct {
	Request string
	Err     error
}

func (e *FatalError) Error() string { return fmt.Sprintf("member: %s: %v", e.Request, e.Err) }
func (e *FatalError) Unwrap() error { return e.Err }

// Member is one running group member. Create it with Start.
type Member struct {
	cfg  Config
	cl   Requester
	own  *kgo.Client
	clk  clock.Clock
	log  *slog.Logger
	ctx  context.Context // cancelled by Close/Abandon: aborts joins and backoffs
	stop context.CancelFunc

	wake     chan struct{} // main loop: something in state changed
	wdWake   chan struct{} // watchdog: holding or deadlines changed
	hbDone   chan struct{} // closed to stop the heartbeat loop
	done     chan struct{} // closed when the member has stopped
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	closing  bool
	abandon  bool
	leaveCtx context.Context

	mu         sync.Mutex
	memberID   string
	gen        Generation // gen.ID < 0: no generation
	stable     bool       // synced and not yet rejoining
	rejoin     bool       // rejoin requested (rebalance seen, or Rejoin)
	holding    bool       // a work context is live
	workCancel context.CancelCauseFunc
	workCtx    context.Context
	aliveUntil time.Time // coordinator keeps our session at least until then
	lastOK     time.Time // send time of the last NONE heartbeat or sync in the stable phase
	phaseLimit time.Time // while rebalancing: removal possible from then (zero: none)
	lost       *lostEvent
	fatal      error
}

type lostEvent struct {
	gen Generation
	err error
}

// Start validates cfg and starts the member in the background. It returns at
// once; Assigned reports the first generation.
func Start(cfg Config) (*Member, error) {
	if cfg.Group == "" || cfg.ProtocolType == "" || cfg.Protocols == nil || cfg.Assign == nil {
		return nil, errors.New("member: Group, ProtocolType, Protocols and Assign are required")
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = 30 * time.Second
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = cfg.SessionTimeout / 3
	}
	if cfg.LostMargin <= 0 {
		cfg.LostMargin = cfg.SessionTimeout / 5
	}
	if cfg.HeartbeatInterval >= cfg.SessionTimeout-cfg.LostMargin {
		return nil, errors.New("member: HeartbeatInterval must be well below SessionTimeout-LostMargin")
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.MaxRetryBackoff < cfg.RetryBackoff {
		cfg.MaxRetryBackoff = max(2*time.Second, cfg.RetryBackoff)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Member{
		cfg:    cfg,
		clk:    cfg.Clock,
		log:    cfg.Logger.With("group", cfg.Group),
		wake:   make(chan struct{}, 1),
		wdWake: make(chan struct{}, 1),
		hbDone: make(chan struct{}),
		done:   make(chan struct{}),
		gen:    Generation{ID: -1},
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
	m.wg.Add(2)
	go m.heartbeatLoop()
	go m.watchdog()
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
	return m.gen, m.stable
}

// Rejoin asks for a rebalance: the member rejoins the group (cooperative
// recipes call it after stopping revoked work). It does nothing while the
// member is already rejoining.
func (m *Member) Rejoin() {
	m.mu.Lock()
	if m.stable {
		m.rejoin = true
	}
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
	return m.fatal
}

// Close stops the member gracefully: the work context is cancelled, Revoked is
// called, and a dynamic member sends LeaveGroup so the group rebalances at
// once (a static member does not: its instance id keeps its place until the
// session timeout). ctx bounds the LeaveGroup.
func (m *Member) Close(ctx context.Context) error {
	m.closeMu.Lock()
	if !m.closing {
		m.closing = true
		m.leaveCtx = ctx
		m.stop()
	}
	m.closeMu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	m.wg.Wait()
	return nil
}

// Abandon stops the member the way a crash would: the work context is
// cancelled and Lost is called, but no LeaveGroup is sent, so the coordinator
// notices only when the session times out. It returns when the member has
// stopped.
func (m *Member) Abandon() {
	m.closeMu.Lock()
	if !m.closing {
		m.closing = true
		m.abandon = true
		m.stop()
	}
	m.closeMu.Unlock()
	<-m.done
	m.wg.Wait()
}

func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Member) pokeWatchdog() {
	select {
	case m.wdWake <- struct{}{}:
	default:
	}
}

// run is the member's main loop: join, sync, report, wait, repeat.
func (m *Member) run() {
	defer func() {
		m.mu.Lock()
		m.stable = false
		m.mu.Unlock()
		close(m.hbDone)
		if m.own != nil {
			m.own.Close()
		}
		close(m.done)
	}()
	backoff := newBackoff(m.cfg.RetryBackoff, m.cfg.MaxRetryBackoff)
	for {
		m.deliverLost()
		if m.ctx.Err() != nil {
			m.shutdown()
			return
		}
		g, err := m.joinAndSync(backoff)
		if err != nil {
			var fe *FatalError
			if errors.As(err, &fe) {
				m.log.Error("member stopped", "err", err)
				m.mu.Lock()
				m.fatal = err
				m.mu.Unlock()
				m.mu.Lock()
				m.loseLocked(err, false)
				m.mu.Unlock()
				m.deliverLost()
				m.stop()
			}
			continue // closing or fatal: the loop top shuts down
		}
		m.deliverLost()
		if m.ctx.Err() != nil {
			continue
		}
		m.startWork(g)
		m.waitForChange()
	}
}

// waitForChange blocks while the generation is stable and handles what ends
// it: a rebalance (revoke if eager, then rejoin), a loss, or Close.
func (m *Member) waitForChange() {
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.wake:
		}
		m.mu.Lock()
		lost, rejoin := m.lost != nil, m.rejoin
		g := m.gen
		if rejoin && !lost {
			m.beginRebalanceLocked()
		}
		m.mu.Unlock()
		switch {
		case lost:
			return
		case rejoin:
			if !m.cfg.Cooperative {
				m.dropWork(ErrRevoked)
				if m.cfg.Revoked != nil {
					m.cfg.Revoked(g)
				}
			}
			return
		}
	}
}

// beginRebalanceLocked leaves the stable phase. From now on the coordinator
// may drop this member once the rebalance timeout has passed since the
// rebalance began, which is no earlier than lastOK.
func (m *Member) beginRebalanceLocked() {
	m.stable = false
	m.rejoin = false
	if m.phaseLimit.IsZero() && !m.lastOK.IsZero() {
		m.phaseLimit = m.lastOK.Add(m.cfg.RebalanceTimeout)
	}
	m.pokeWatchdog()
}

// startWork records the new generation and calls Assigned.
func (m *Member) startWork(g Generation) {
	m.mu.Lock()
	if !m.holding || m.workCtx == nil || !m.cfg.Cooperative {
		if m.workCancel != nil {
			m.workCancel(ErrRevoked)
		}
		m.workCtx, m.workCancel = context.WithCancelCause(context.Background())
	}
	m.holding = true
	m.stable = true
	m.phaseLimit = time.Time{}
	ctx := m.workCtx
	m.mu.Unlock()
	m.pokeWatchdog()
	m.log.Debug("assigned", "generation", g.ID, "member", g.MemberID, "leader", g.Leader)
	if m.cfg.Assigned != nil {
		m.cfg.Assigned(ctx, g)
	}
}

// dropWork cancels the work context with cause.
func (m *Member) dropWork(cause error) {
	m.mu.Lock()
	m.dropWorkLocked(cause)
	m.mu.Unlock()
}

func (m *Member) dropWorkLocked(cause error) {
	if m.workCancel != nil {
		m.workCancel(cause)
	}
	m.workCtx, m.workCancel = nil, nil
	m.holding = false
	m.pokeWatchdog()
}

// loseLocked records a loss of membership: the work stops now, Lost is
// called by the main loop, and the next join starts without a generation
// (and without a member id when the coordinator no longer knows it).
func (m *Member) loseLocked(err error, resetID bool) {
	if m.holding && m.lost == nil {
		m.lost = &lostEvent{gen: m.gen, err: err}
	}
	m.dropWorkLocked(err)
	m.stable = false
	m.phaseLimit = time.Time{}
	m.gen = Generation{ID: -1}
	if resetID && m.cfg.InstanceID == "" {
		m.memberID = ""
	}
	m.poke()
}

// deliverLost calls Lost for a pending loss.
func (m *Member) deliverLost() {
	m.mu.Lock()
	ev := m.lost
	m.lost = nil
	m.mu.Unlock()
	if ev != nil {
		m.log.Warn("membership lost", "generation", ev.gen.ID, "member", ev.gen.MemberID, "err", ev.err)
		if m.cfg.Lost != nil {
			m.cfg.Lost(ev.gen, ev.err)
		}
	}
}

// shutdown ends the member after Close or Abandon (or a fatal error).
func (m *Member) shutdown() {
	m.closeMu.Lock()
	abandon, leaveCtx := m.abandon, m.leaveCtx
	m.closeMu.Unlock()
	m.mu.Lock()
	g, holding, id := m.gen, m.holding, m.memberID
	fatal := m.fatal != nil
	m.mu.Unlock()
	if fatal {
		return
	}
	if abandon {
		m.dropWork(ErrAbandoned)
		if holding && m.cfg.Lost != nil {
			m.cfg.Lost(g, ErrAbandoned)
		}
		return
	}
	m.dropWork(ErrClosed)
	if holding && m.cfg.Revoked != nil {
		m.cfg.Revoked(g)
	}
	if m.cfg.InstanceID != "" || id == "" {
		return
	}
	if leaveCtx == nil {
		leaveCtx = context.Background()
	}
	ctx, cancel := context.WithTimeout(leaveCtx, m.cfg.SessionTimeout)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.cfg.Group
	req.MemberID = id
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = id
	reason := "closing"
	lm.Reason = &reason
	req.Members = []kmsg.LeaveGroupRequestMember{lm}
	resp, err := m.cl.Request(ctx, req)
	if err == nil {
		r := resp.(*kmsg.LeaveGroupResponse)
		err = kerr.ErrorForCode(r.ErrorCode)
		if err == nil && len(r.Members) > 0 {
			err = kerr.ErrorForCode(r.Members[0].ErrorCode)
		}
	}
	if err != nil {
		m.log.Warn("LeaveGroup failed; the coordinator will expire the session", "member", id, "err", err)
	} else {
		m.log.Debug("left group", "member", id)
	}
}

// wait sleeps for d on the member's clock, or until the member closes.
func (m *Member) wait(d time.Duration) bool {
	t := m.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-m.ctx.Done():
		return false
	}
}

type backoff struct {
	base, maxD, cur time.Duration
}

func newBackoff(base, maxD time.Duration) *backoff { return &backoff{base: base, maxD: maxD} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.maxD)
	}
	// Up to 20% jitter so that members do not retry in lockstep.
	return b.cur - time.Duration(rand.Int64N(int64(b.cur)/5+1))
}

func (b *backoff) reset() { b.cur = 0 }
