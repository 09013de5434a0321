package member

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Machine is the member's protocol logic with no I/O, no goroutines and no
// clock: the shape of etcd raft's RawNode. Inputs are responses (Step), the
// passing of time (Tick), the results of callbacks (CallbackDone) and the
// user's calls (Rejoin, Close, CloseNow, Abandon), each with the current
// time. Outputs are collected by Ready: requests to send, work contexts to
// cancel, callbacks to run in order, and the time by which Tick must be
// called next.
//
// Member runs a Machine behind a small loop that sends the requests, runs
// the callbacks on one goroutine and feeds the results back; tests drive a
// Machine directly against a coordinator (package group's shard) with
// thousands of seeded schedules. A Machine is not safe for concurrent use.
//
// Contract for the driver: every Request gets exactly one Step (its response,
// or an error once Request.Timeout has passed or it could not be sent), and
// every Callback gets exactly one CallbackDone after it returned. A Cancel
// must take effect before the driver feeds the next input.
type Machine struct {
	cfg Config
	log *slog.Logger
	rnd *rand.Rand
	b   backoff

	memberID   string
	gen        Generation // gen.ID < 0: no generation
	phase      phase
	stable     bool // synced and not yet rejoining
	rejoin     bool // rebalance wanted (heartbeat or Rejoin) while stable
	holding    bool // a work context is live
	work       uint64
	aliveUntil time.Time // the coordinator keeps our session at least until then
	lastOK     time.Time // send time of the last NONE heartbeat or sync in the stable phase
	phaseLimit time.Time // while rebalancing: removal possible from then (zero: none)
	joinFrom   time.Time // send time of the first JoinGroup since one was answered with a generation
	retryAt    time.Time // phase backoff: when to join again
	nextHB     time.Time
	hbBusy     bool
	fcBusy     bool
	unexpected map[int16]unexpectedCode // error codes the table does not list, seen since the last sync

	cur       uint64     // id of the join or sync in flight, or of the Assign callback
	assigning Generation // the generation the Assign callback runs for
	syncing   Generation
	inflight  map[uint64]sent
	pending   int // callbacks handed out and not done
	ids       uint64

	closing  bool
	finish   bool // closing, but the join or sync under way completes first (Config.FinishRebalanceOnClose)
	abandon  bool
	shutdown bool // the final callbacks / LeaveGroup were issued
	leaving  bool
	done     bool
	fatal    error

	out Ready
}

type phase uint8

const (
	phIdle    phase = iota // join as soon as no callback runs
	phBackoff              // join at retryAt
	phJoin                 // JoinGroup in flight
	phAssign               // the leader's Assign callback runs
	phSync                 // SyncGroup in flight
	phStable               // synced
)

type sent struct {
	kind RequestKind
	at   time.Time
	id   string
	gen  int32
}

// RequestKind says which request a Request carries.
type RequestKind uint8

// The request kinds a Machine sends.
const (
	FindCoordinator RequestKind = iota + 1
	JoinGroup
	SyncGroup
	Heartbeat
	LeaveGroup
)

func (k RequestKind) String() string {
	return [...]string{"?", "FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"}[k]
}

// Request is one request for the driver to send. Timeout bounds the wait for
// its response (then the driver steps an error). A JoinGroup request leaves
// Protocols empty: the driver fills them from Config.Protocols just before
// sending, so that they carry what the member owns at that moment.
type Request struct {
	ID      uint64
	Kind    RequestKind
	Req     kmsg.Request
	Timeout time.Duration
}

// CallbackKind says which Config callback a Callback is.
type CallbackKind uint8

// The callbacks.
const (
	CallAssign   CallbackKind = iota + 1 // Config.Assign; report the result with CallbackDone
	CallAssigned                         // Config.Assigned with the context of Work
	CallRevoked                          // Config.Revoked
	CallLost                             // Config.Lost with Err
)

// Callback is one user callback to run. Callbacks run one at a time in the
// order given.
type Callback struct {
	ID   uint64
	Kind CallbackKind
	Gen  Generation
	// Work identifies the work context passed to Assigned: a new id means a
	// new context, the same id (cooperative rebalances) the same context.
	Work uint64
	Err  error
}

// Cancel asks the driver to cancel the work context Work with Cause now,
// even while a callback runs.
type Cancel struct {
	Work  uint64
	Cause error
}

// Ready is what the machine produced since the last call to Ready.
type Ready struct {
	Requests  []Request
	Cancels   []Cancel
	Callbacks []Callback
	// Deadline is when Tick must be called at the latest (zero: no timer).
	Deadline time.Time
}

// Action is what the member does about an error code, the same for every
// request kind (see ActionFor).
type Action uint8

// The actions.
const (
	ActNone            Action = iota // success
	ActRetry                         // retry at once (MEMBER_ID_REQUIRED: with the id given)
	ActBackoff                       // retry after the back-off
	ActRediscover                    // the coordinator moved: find it again, then retry after the back-off
	ActRejoin                        // a rebalance: rejoin with the same member id and generation
	ActResetGeneration               // the generation is over: lose it, rejoin with the same member id
	ActResetMemberID                 // the member is unknown: lose the generation and the member id, rejoin
	ActFatal                         // stop: retrying cannot help
)

func (a Action) String() string {
	return [...]string{"none", "retry", "backoff", "rediscover", "rejoin", "reset-generation", "reset-member-id", "fatal"}[a]
}

// ActionFor is the one table from Kafka error code to action, used for every
// request kind. A request that got no response (a transport error or a
// timeout) is ActBackoff, unless the client's error carries a code this
// table stops on (see codeOf).
//
// SASL_AUTHENTICATION_FAILED and UNSUPPORTED_SASL_MECHANISM are ActFatal:
// the connection's credentials or mechanism were refused, which Kafka's
// clients raise to the application as an authentication error rather than
// retry. A password changed while the member runs stops it only when it
// next authenticates with the old one: on a new connection, or when the
// node's session lifetime asks for a re-authentication (KIP-368).
//
// INVALID_REQUEST is ActFatal: the coordinator could not make sense of the
// request, and resending the same request cannot help (a client bug).
// Codes the table does not list are ActBackoff, but unexpected: the member
// logs each at Warn the first time it sees it since it was last synced, and
// then at most once a minute while it persists, with the count. That covers
// UNKNOWN_SERVER_ERROR (the coordinator failed, for example to store the
// group: transient) and GROUP_ID_NOT_FOUND (Kafka's coordinator answers it
// to a classic JoinGroup for a group id held by a group of another type,
// which lasts until an operator deletes that group): they are retried,
// visibly, rather than stopping the member for a condition that may clear.
func ActionFor(code int16) Action {
	a, _ := actionFor(code)
	return a
}

// actionFor is ActionFor and whether the table lists code.
func actionFor(code int16) (Action, bool) {
	switch code {
	case 0:
		return ActNone, true
	case kerr.MemberIDRequired.Code:
		return ActRetry, true
	case kerr.CoordinatorLoadInProgress.Code:
		return ActBackoff, true
	case kerr.RebalanceInProgress.Code:
		return ActRejoin, true
	case kerr.IllegalGeneration.Code:
		return ActResetGeneration, true
	case kerr.UnknownMemberID.Code:
		return ActResetMemberID, true
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
		return ActRediscover, true
	case kerr.FencedInstanceID.Code, kerr.InconsistentGroupProtocol.Code, kerr.GroupMaxSizeReached.Code,
		kerr.InvalidSessionTimeout.Code, kerr.InvalidGroupID.Code, kerr.GroupAuthorizationFailed.Code,
		kerr.UnsupportedVersion.Code, kerr.InvalidRequest.Code,
		kerr.SaslAuthenticationFailed.Code, kerr.UnsupportedSaslMechanism.Code:
		return ActFatal, true
	default: // unexpected: retried, and logged at Warn (see ActionFor)
		return ActBackoff, false
	}
}

// unexpectedWarnEvery is how often an unexpected error code that persists
// is logged again at Warn.
const unexpectedWarnEvery = time.Minute

type unexpectedCode struct {
	warned time.Time // when it was last logged at Warn
	n      int       // answers with it since then
}

// NewMachine returns a machine for cfg (defaults applied as by Start; Client,
// Brokers, ClientOpts and Clock are not used). now is the start time; seed
// seeds the back-off jitter.
func NewMachine(cfg Config, now time.Time, seed uint64) (*Machine, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	m := &Machine{
		cfg:      cfg,
		log:      cfg.Logger.With("group", cfg.Group),
		rnd:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		gen:      Generation{ID: -1},
		inflight: make(map[uint64]sent),
		nextHB:   now.Add(cfg.HeartbeatInterval),
	}
	m.b = backoff{base: cfg.RetryBackoff, maxD: cfg.MaxRetryBackoff, rnd: m.rnd}
	m.advance(now)
	return m, nil
}

// WithDefaults returns c with each timing setting left at zero
// (SessionTimeout, RebalanceTimeout, HeartbeatInterval, LostMargin,
// RetryBackoff, MaxRetryBackoff) set to the value Start uses for it, for
// code built on a member that needs the same timings.
func (c Config) WithDefaults() Config {
	cfg := c
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = 30 * time.Second
	}
	// The heartbeat and the margin fit the shorter of the two timeouts:
	// a dynamic member may be dropped the rebalance timeout after a
	// rebalance it has not heard of began (lostAt).
	window := min(cfg.SessionTimeout, cfg.RebalanceTimeout)
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = window / 3
	}
	if cfg.LostMargin <= 0 {
		cfg.LostMargin = window / 5
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.MaxRetryBackoff < cfg.RetryBackoff {
		cfg.MaxRetryBackoff = max(2*time.Second, cfg.RetryBackoff)
	}
	return cfg
}

func withDefaults(cfg Config) (Config, error) {
	// Name only what is missing: the recipes set all but Group
	// themselves, and their users never set the others.
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{{"Group", cfg.Group == ""}, {"ProtocolType", cfg.ProtocolType == ""},
		{"Protocols", cfg.Protocols == nil}, {"Assign", cfg.Assign == nil}} {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		verb := " are required"
		if len(missing) == 1 {
			verb = " is required"
		}
		return cfg, errors.New("member: Config." + strings.Join(missing, ", Config.") + verb)
	}
	cfg = cfg.WithDefaults()
	if cfg.HeartbeatInterval >= cfg.SessionTimeout-cfg.LostMargin {
		return cfg, fmt.Errorf("member: HeartbeatInterval (%v) must be well below SessionTimeout-LostMargin (%v-%v); "+
			"left at 0 it is a third of the shorter of SessionTimeout and RebalanceTimeout",
			cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.LostMargin)
	}
	if cfg.InstanceID == "" && cfg.HeartbeatInterval >= cfg.RebalanceTimeout-cfg.LostMargin {
		// lostAt: a dynamic member counts the rebalance timeout from its
		// last confirmed heartbeat too, so a shorter one would declare
		// it lost between two heartbeats.
		return cfg, fmt.Errorf("member: HeartbeatInterval (%v) must be well below RebalanceTimeout-LostMargin (%v-%v) "+
			"for a dynamic member; left at 0 it is a third of the shorter of SessionTimeout and RebalanceTimeout",
			cfg.HeartbeatInterval, cfg.RebalanceTimeout, cfg.LostMargin)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// Ready returns and clears what the machine produced.
func (m *Machine) Ready() Ready {
	rd := m.out
	m.out = Ready{}
	rd.Deadline = m.deadline()
	return rd
}

// Generation returns the current generation and true while the member is
// synced and not rebalancing.
func (m *Machine) Generation() (Generation, bool) { return m.gen, m.stable }

// Done reports whether the member has stopped: after Close or Abandon (or a
// fatal error) once every callback returned and the LeaveGroup was answered.
func (m *Machine) Done() bool { return m.done }

// Err is the *FatalError that stopped the member, if any.
func (m *Machine) Err() error { return m.fatal }

// Tick tells the machine the time.
func (m *Machine) Tick(now time.Time) { m.advance(now) }

// Rejoin asks for a rebalance (ignored unless stable).
func (m *Machine) Rejoin(now time.Time) {
	if m.stable {
		m.rejoin = true
	}
	m.advance(now)
}

// Close stops gracefully: once no callback runs, the work is cancelled,
// Revoked called, and a dynamic member sends LeaveGroup. With
// Config.FinishRebalanceOnClose, a member that holds its work while its
// JoinGroup or SyncGroup is under way (or its Assign runs) first lets that
// rebalance complete: the answers are still taken (the leader still syncs)
// and no new join is sent; once synced, Revoked is called with the new
// generation (Assigned is not), in which the coordinator accepts commits.
// If the join, Assign or sync fails, or the work is lost, the member stops
// waiting and stops as without the option. CloseNow ends the wait.
func (m *Machine) Close(now time.Time) {
	if !m.closing {
		m.closing = true
		m.finish = m.cfg.FinishRebalanceOnClose && m.holding && m.rebalancing()
		if m.finish {
			m.log.Debug("closing once the rebalance under way completes", "generation", m.gen.ID, "member", m.memberID)
		}
	}
	m.advance(now)
}

// CloseNow is Close without waiting for a rebalance under way, also after
// Close (its time to wait ran out): the join or sync is abandoned, and the
// work revoked in the generation the member has.
func (m *Machine) CloseNow(now time.Time) {
	m.closing = true
	m.finish = false
	m.advance(now)
}

// Abandon stops as a crash would: the work is cancelled and Lost called, no
// LeaveGroup.
func (m *Machine) Abandon(now time.Time) {
	if !m.closing {
		m.abandon = true
	}
	m.closing = true
	m.finish = false
	m.advance(now)
}

// rebalancing reports whether a JoinGroup or SyncGroup is under way or the
// leader's Assign runs.
func (m *Machine) rebalancing() bool {
	return m.phase == phJoin || m.phase == phAssign || m.phase == phSync
}

// CallbackDone reports that callback id returned; for CallAssign with the
// assignments and error Assign returned.
func (m *Machine) CallbackDone(now time.Time, id uint64, assignments map[string][]byte, err error) {
	m.pending--
	if m.phase == phAssign && id == m.cur && (!m.closing || m.finish) {
		if err != nil {
			// Rejoining in CompletingRebalance answers at once with the
			// same generation, so the leader simply tries again.
			m.log.Error("assign failed; retrying", "generation", m.assigning.ID, "err", err)
			m.act(now, ActBackoff, "Assign", err)
		} else {
			// The generation the Assign ran for, not m.gen: the watchdog
			// may have declared the work lost meanwhile (m.gen reset).
			// The sync is still sent: the work context is already
			// cancelled, and the coordinator, which may well accept it,
			// need not wait for the session to expire to complete the
			// generation; if it does accept it the member starts the
			// generation's work in a new context.
			m.sendSync(now, m.assigning, assignments)
		}
	}
	m.advance(now)
}

// Step feeds the response to request id (resp nil and err set when there was
// none).
func (m *Machine) Step(now time.Time, id uint64, resp kmsg.Response, err error) {
	s, ok := m.inflight[id]
	if !ok {
		return
	}
	delete(m.inflight, id)
	// The watchdog first: an answer read at or past the loss deadline
	// (the member's goroutine saw it before its timer, after a freeze)
	// comes too late. Leases have refused since the deadline, and work
	// that stopped on that refusal must not stay announced as held.
	if !m.done {
		m.watchdog(now)
	}
	switch s.kind {
	case FindCoordinator:
		m.fcBusy = false
	case Heartbeat:
		m.hbBusy = false
		m.nextHB = s.at.Add(m.cfg.HeartbeatInterval)
		m.onHeartbeat(now, s, resp, err)
	case LeaveGroup:
		m.leaving = false
		if err == nil {
			if r, ok := resp.(*kmsg.LeaveGroupResponse); ok {
				err = kerr.ErrorForCode(r.ErrorCode)
				if err == nil && len(r.Members) > 0 {
					err = kerr.ErrorForCode(r.Members[0].ErrorCode)
				}
			}
		}
		if err != nil {
			m.log.Warn("LeaveGroup failed; the coordinator will expire the session", "member", s.id, "err", err)
		} else {
			m.log.Debug("left group", "member", s.id)
		}
	case JoinGroup:
		if id == m.cur && m.phase == phJoin && (!m.closing || m.finish) {
			m.onJoin(now, s, resp, err)
		}
	case SyncGroup:
		if id == m.cur && m.phase == phSync && (!m.closing || m.finish) {
			m.onSync(now, s, resp, err)
		}
	}
	m.advance(now)
}

func (m *Machine) send(now time.Time, kind RequestKind, req kmsg.Request, timeout time.Duration) uint64 {
	m.ids++
	m.inflight[m.ids] = sent{kind: kind, at: now, id: m.memberID, gen: m.gen.ID}
	m.out.Requests = append(m.out.Requests, Request{ID: m.ids, Kind: kind, Req: req, Timeout: timeout})
	return m.ids
}

func (m *Machine) call(cb Callback) uint64 {
	m.ids++
	cb.ID = m.ids
	m.pending++
	m.out.Callbacks = append(m.out.Callbacks, cb)
	return cb.ID
}

func (m *Machine) instance() *string {
	if m.cfg.InstanceID == "" {
		return nil
	}
	inst := m.cfg.InstanceID
	return &inst
}

// act applies the table's action for a failed join or sync (what) or a
// failed Assign: the join cycle always restarts at JoinGroup.
func (m *Machine) act(now time.Time, a Action, what string, err error) {
	switch a {
	case ActRetry, ActRejoin:
		m.phase = phIdle
	case ActResetGeneration, ActResetMemberID:
		m.lose(err, a == ActResetMemberID)
		m.phase = phIdle
	case ActFatal:
		if errors.Is(err, kerr.InvalidSessionTimeout) {
			// Kafka's text names the broker settings of Kafka; say
			// what this member asked for and cohort's flags.
			err = fmt.Errorf("%w (Config.SessionTimeout is %v; cohort serve accepts "+
				"--min-session-timeout to --max-session-timeout, 6s to 30m by default)", err, m.cfg.SessionTimeout)
		}
		m.fail(&FatalError{Request: what, Err: err})
	default: // ActBackoff, ActRediscover
		if a == ActRediscover {
			m.findCoordinator(now)
		}
		m.log.Debug(what+" failed; retrying after a back-off", "err", err)
		m.phase = phBackoff
		m.retryAt = now.Add(m.b.next())
	}
}

func (m *Machine) findCoordinator(now time.Time) {
	if m.fcBusy {
		return
	}
	m.fcBusy = true
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = m.cfg.Group
	req.CoordinatorKeys = []string{m.cfg.Group}
	m.send(now, FindCoordinator, req, m.cfg.SessionTimeout)
}

func (m *Machine) fail(err error) {
	m.log.Error("member stopped", "err", err)
	m.fatal = err
	m.lose(err, false)
	m.closing = true
	m.finish = false
}

// codeOf returns the error code of a response (ok false when there was no
// response: UNKNOWN_SERVER_ERROR is code -1).
//
// kgo answers some refusals with an error and no response: the coordinator
// lookup's (FindCoordinator answered GROUP_AUTHORIZATION_FAILED) and the
// connection's authentication (SASL_AUTHENTICATION_FAILED). Such an error
// whose code the table stops on counts as that code, so that the member stops
// as it would on the coordinator's own answer instead of retrying a refusal
// for ever; any other error is a transport error.
func codeOf(resp kmsg.Response, err error) (code int16, ok bool, _ error) {
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) && ActionFor(ke.Code) == ActFatal {
			return ke.Code, true, err
		}
		return 0, false, err
	}
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		code = r.ErrorCode
	case *kmsg.SyncGroupResponse:
		code = r.ErrorCode
	case *kmsg.HeartbeatResponse:
		code = r.ErrorCode
	default:
		return 0, false, errors.New("member: unexpected response type")
	}
	return code, true, kerr.ErrorForCode(code)
}

// actionOf maps the response to a request of kind what, or its transport
// error, through the table, and logs a code the table does not list at
// Warn (the first time since the member was last synced, then at most
// every unexpectedWarnEvery while it persists).
func (m *Machine) actionOf(now time.Time, what string, resp kmsg.Response, err error) (Action, error) {
	code, ok, err := codeOf(resp, err)
	if !ok {
		if tlsRefused(err) {
			return ActFatal, err
		}
		return ActBackoff, err
	}
	a, known := actionFor(code)
	if !known {
		if m.unexpected == nil {
			m.unexpected = make(map[int16]unexpectedCode)
		}
		u := m.unexpected[code]
		u.n++
		if u.warned.IsZero() || now.Sub(u.warned) >= unexpectedWarnEvery {
			m.log.Warn(what+" answered with an unexpected error code; retrying",
				"code", code, "err", err, "times", u.n, "generation", m.gen.ID, "member", m.memberID)
			u.warned, u.n = now, 0
		}
		m.unexpected[code] = u
	}
	return a, err
}

// tlsRefused reports whether err is a TLS handshake that failed on a
// certificate: this client does not trust the node's (another CA, a name
// the certificate does not hold, expired), or the node refused this
// client's (none given on a listener that requires one, or one it does not
// trust), which it reports with an alert. Retrying the same configuration
// against the same node cannot succeed; Kafka's clients raise it to the
// application as an authentication error (SslAuthenticationException).
func tlsRefused(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	// crypto/tls reports an alert received from the peer as a *net.OpError
	// with Op "remote error"; the alert's type is not exported.
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "remote error" && op.Err != nil {
		switch op.Err.Error() {
		case "tls: bad certificate", "tls: unsupported certificate", "tls: revoked certificate",
			"tls: expired certificate", "tls: unknown certificate", "tls: unknown certificate authority",
			"tls: certificate required", "tls: access denied":
			return true
		}
	}
	return false
}

func (m *Machine) sendJoin(now time.Time) {
	m.rejoin = false
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = m.cfg.Group
	req.SessionTimeoutMillis = int32(m.cfg.SessionTimeout / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout / time.Millisecond)
	req.MemberID = m.memberID
	req.InstanceID = m.instance()
	req.ProtocolType = m.cfg.ProtocolType
	if m.joinFrom.IsZero() {
		m.joinFrom = now
	}
	// A join parks until the rebalance completes: up to the (largest)
	// rebalance timeout, or the coordinator's initial delay.
	m.cur = m.send(now, JoinGroup, req, m.cfg.RebalanceTimeout+m.cfg.SessionTimeout+5*time.Second)
	m.phase = phJoin
}

func (m *Machine) onJoin(now time.Time, s sent, resp kmsg.Response, err error) {
	a, err := m.actionOf(now, "JoinGroup", resp, err)
	if a != ActNone {
		if a == ActRetry { // MEMBER_ID_REQUIRED
			m.memberID = resp.(*kmsg.JoinGroupResponse).MemberID
		}
		m.act(now, a, "JoinGroup", err)
		return
	}
	jr := resp.(*kmsg.JoinGroupResponse)
	g := Generation{
		ID:         jr.Generation,
		MemberID:   jr.MemberID,
		InstanceID: m.cfg.InstanceID,
		LeaderID:   jr.LeaderID,
		Leader:     jr.LeaderID == jr.MemberID,
	}
	if jr.Protocol != nil {
		g.Protocol = *jr.Protocol
	}
	if g.Leader {
		for _, mm := range jr.Members {
			gm := GroupMember{ID: mm.MemberID, Metadata: mm.ProtocolMetadata}
			if mm.InstanceID != nil {
				gm.InstanceID = *mm.InstanceID
			}
			g.Members = append(g.Members, gm)
		}
	}
	// The coordinator drops members that have not synced within the
	// rebalance timeout of the join phase's completion. That is no earlier
	// than the first JoinGroup sent since the last one answered with a
	// generation, but it can be earlier than this one: a join whose answer
	// was lost (a transport error or timeout after the coordinator took it)
	// may have completed the generation, and the rejoin after the back-off
	// is then answered at once with it. So the limit counts from that first
	// join. And a join answered with the generation this member is already
	// completing (a rejoin after a failed Assign or SyncGroup while the
	// group is CompletingRebalance is answered at once) does not move the
	// coordinator's deadline: it was set when that generation completed, so
	// the earlier limit stays.
	from := s.at
	if !m.joinFrom.IsZero() && m.joinFrom.Before(from) {
		from = m.joinFrom
	}
	m.joinFrom = time.Time{}
	limit := from.Add(m.cfg.RebalanceTimeout)
	if same := !m.phaseLimit.IsZero() && m.gen.ID >= 0 && m.gen.ID == g.ID && m.gen.MemberID == g.MemberID; same && m.phaseLimit.Before(limit) {
		limit = m.phaseLimit
	}
	m.memberID = jr.MemberID
	m.gen = g
	m.refresh(s.at)
	m.phaseLimit = limit
	if g.Leader && !jr.SkipAssignment {
		m.phase = phAssign
		m.assigning = g
		m.cur = m.call(Callback{Kind: CallAssign, Gen: g})
		return
	}
	m.sendSync(now, g, nil)
}

func (m *Machine) sendSync(now time.Time, g Generation, assignments map[string][]byte) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group = m.cfg.Group
	req.Generation = g.ID
	req.MemberID = g.MemberID
	req.InstanceID = m.instance()
	pt, pn := m.cfg.ProtocolType, g.Protocol
	req.ProtocolType, req.Protocol = &pt, &pn
	for id, a := range assignments {
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, sa)
	}
	m.syncing = g
	// Followers park until the leader syncs (at most the rebalance timeout).
	m.cur = m.send(now, SyncGroup, req, m.cfg.RebalanceTimeout+5*time.Second)
	m.phase = phSync
}

func (m *Machine) onSync(now time.Time, s sent, resp kmsg.Response, err error) {
	a, err := m.actionOf(now, "SyncGroup", resp, err)
	if a != ActNone {
		m.act(now, a, "SyncGroup", err)
		return
	}
	m.unexpected = nil // a later unexpected code is news again
	g := m.syncing
	g.Assignment = resp.(*kmsg.SyncGroupResponse).MemberAssignment
	m.gen = g
	m.refresh(s.at)
	if s.at.After(m.lastOK) {
		m.lastOK = s.at
	}
	m.b.reset()
	if m.finish {
		// Closing: the generation is complete and the coordinator now
		// accepts commits in it; the shutdown revokes the work in it
		// instead of starting the new assignment.
		m.finish = false
		m.phaseLimit = time.Time{}
		m.phase = phStable
		m.log.Debug("rebalance completed while closing", "generation", g.ID, "member", g.MemberID)
		return
	}
	// Start the work: a new context unless a cooperative member still
	// holds one.
	if !m.holding || m.work == 0 || !m.cfg.Cooperative {
		m.cancelWork(ErrRevoked)
		m.ids++
		m.work = m.ids
	}
	m.holding = true
	m.stable = true
	m.phaseLimit = time.Time{}
	m.phase = phStable
	m.log.Debug("assigned", "generation", g.ID, "member", g.MemberID, "leader", g.Leader)
	m.call(Callback{Kind: CallAssigned, Gen: g, Work: m.work})
}

// refresh records that the coordinator confirmed this member for a request
// sent at at: the coordinator re-armed the session no earlier.
func (m *Machine) refresh(at time.Time) {
	if until := at.Add(m.cfg.SessionTimeout); until.After(m.aliveUntil) {
		m.aliveUntil = until
	}
}

func (m *Machine) onHeartbeat(now time.Time, s sent, resp kmsg.Response, err error) {
	if s.id != m.memberID || s.gen != m.gen.ID {
		return // answers for a generation we already left
	}
	a, err := m.actionOf(now, "Heartbeat", resp, err)
	switch a {
	case ActNone:
		m.refresh(s.at)
		if m.stable && s.at.After(m.lastOK) {
			m.lastOK = s.at
		}
	case ActRejoin:
		// The coordinator re-arms the session in PreparingRebalance.
		m.refresh(s.at)
		if m.stable {
			m.log.Debug("rebalance in progress", "generation", s.gen)
			m.rejoin = true
			m.limitPhase()
			if !m.cfg.Cooperative {
				m.cancelWork(ErrRevoked)
			}
		}
	case ActResetGeneration, ActResetMemberID, ActFatal:
		// While rejoining, the join's answer decides; when stable, the
		// generation is over for us.
		if !m.stable {
			break
		}
		if a == ActFatal {
			m.fail(&FatalError{Request: "Heartbeat", Err: err})
			break
		}
		m.lose(err, a == ActResetMemberID)
		m.phase = phIdle
	case ActRediscover:
		m.findCoordinator(now)
	default:
		m.log.Debug("heartbeat failed", "generation", s.gen, "err", err)
	}
}

// limitPhase starts the rebalance clock: the coordinator may drop this
// member once the rebalance timeout has passed since the rebalance began,
// which is no earlier than lastOK.
func (m *Machine) limitPhase() {
	if m.phaseLimit.IsZero() && !m.lastOK.IsZero() {
		m.phaseLimit = m.lastOK.Add(m.cfg.RebalanceTimeout)
	}
}

func (m *Machine) cancelWork(cause error) {
	if m.work != 0 && !brokenKeepWork {
		m.out.Cancels = append(m.out.Cancels, Cancel{Work: m.work, Cause: cause})
		m.work = 0
	}
	m.holding = false
}

// lose records a loss of membership: the work stops now, Lost is called,
// and the next join starts without a generation (and without a member id
// when the coordinator no longer knows it).
func (m *Machine) lose(err error, resetID bool) {
	if m.holding && !brokenKeepWork {
		m.call(Callback{Kind: CallLost, Gen: m.gen, Err: err})
	}
	m.cancelWork(err)
	m.stable = false
	m.phaseLimit = time.Time{}
	m.gen = Generation{ID: -1}
	if resetID {
		// Static members too: the coordinator no longer knows the id
		// (the session ran out), and a join naming it is refused for
		// ever; the instance id alone joins again, as Kafka's client
		// does it.
		m.memberID = ""
	}
}

// advance runs what is due at now: the lost watchdog, heartbeats, the start
// of a rebalance, joins, and the shutdown.
func (m *Machine) advance(now time.Time) {
	if m.done {
		return
	}
	m.watchdog(now)
	if !m.hbBusy && now.Compare(m.nextHB) >= 0 {
		if m.memberID != "" && m.gen.ID >= 0 {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Group = m.cfg.Group
			req.Generation = m.gen.ID
			req.MemberID = m.memberID
			req.InstanceID = m.instance()
			// One interval per attempt: a heartbeat that hangs must
			// not hold back the next one.
			m.send(now, Heartbeat, req, m.cfg.HeartbeatInterval)
			m.hbBusy = true
		} else {
			m.nextHB = now.Add(m.cfg.HeartbeatInterval)
		}
	}
	if m.closing {
		if m.finish && (!m.holding || !m.rebalancing()) {
			// The join, Assign or sync failed, or the work was lost:
			// nothing to finish.
			m.finish = false
		}
		if !m.finish {
			m.advanceShutdown(now)
		}
		return
	}
	if m.phase == phStable && m.rejoin && m.pending == 0 {
		m.stable = false
		m.rejoin = false
		m.limitPhase()
		if !m.cfg.Cooperative {
			g := m.gen
			m.cancelWork(ErrRevoked)
			if !brokenKeepWork {
				m.call(Callback{Kind: CallRevoked, Gen: g})
			}
		}
		m.phase = phIdle
	}
	if m.phase == phBackoff && now.Compare(m.retryAt) >= 0 {
		m.phase = phIdle
	}
	if m.phase == phIdle && m.pending == 0 {
		m.sendJoin(now)
	}
}

// watchdog declares the membership lost once now has reached the loss
// deadline (lostAt), the instant from which ValidUntil's callers refuse.
func (m *Machine) watchdog(now time.Time) {
	if m.holding && now.Compare(m.lostAt()) >= 0 {
		m.log.Warn("no confirmed heartbeat within the session; stopping work",
			"generation", m.gen.ID, "member", m.memberID)
		m.lose(ErrSessionLost, false)
		if m.phase == phStable {
			m.phase = phIdle
		}
	}
}

func (m *Machine) advanceShutdown(now time.Time) {
	if m.pending > 0 {
		return
	}
	if !m.shutdown {
		m.shutdown = true
		m.stable = false
		holding, g := m.holding, m.gen
		switch {
		case m.fatal != nil:
		case m.abandon:
			m.cancelWork(ErrAbandoned)
			if holding {
				m.call(Callback{Kind: CallLost, Gen: g, Err: ErrAbandoned})
			}
		default:
			m.cancelWork(ErrClosed)
			if holding {
				m.call(Callback{Kind: CallRevoked, Gen: g})
			}
		}
		if m.pending > 0 {
			return
		}
	}
	if m.fatal == nil && !m.abandon && !m.leaving && m.cfg.InstanceID == "" && m.memberID != "" {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = m.cfg.Group
		req.MemberID = m.memberID
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.memberID
		reason := "closing"
		lm.Reason = &reason
		req.Members = []kmsg.LeaveGroupRequestMember{lm}
		m.send(now, LeaveGroup, req, m.cfg.SessionTimeout)
		m.leaving = true
		m.memberID = "" // sent once
		return
	}
	if !m.leaving {
		m.done = true
	}
}

// lostAt is when the watchdog declares the membership lost: LostMargin
// before the session could expire (measured from the send time of the last
// confirmed request) or before the rebalance timeout could drop the member:
// while rebalancing from phaseLimit, and, for a dynamic member, in the
// stable phase too. A rebalance this member has not heard of (its
// heartbeats get no answer) may have begun as soon as the coordinator
// answered the last heartbeat NONE, no earlier than lastOK; the coordinator
// drops the dynamic members that have not rejoined when the join phase
// ends, the rebalance timeout after it began (static members stay until
// their session expires). With a rebalance timeout shorter than the session
// that comes first.
func (m *Machine) lostAt() time.Time {
	deadline := m.aliveUntil
	limit := m.phaseLimit
	if limit.IsZero() && m.cfg.InstanceID == "" && !m.lastOK.IsZero() {
		limit = m.lastOK.Add(m.cfg.RebalanceTimeout)
	}
	if !limit.IsZero() && limit.Before(deadline) {
		deadline = limit
	}
	return deadline.Add(-m.cfg.LostMargin)
}

func (m *Machine) deadline() time.Time {
	if m.done {
		return time.Time{}
	}
	var d time.Time
	earlier := func(t time.Time) {
		if d.IsZero() || t.Before(d) {
			d = t
		}
	}
	if !m.hbBusy {
		earlier(m.nextHB)
	}
	if m.holding {
		earlier(m.lostAt())
	}
	if m.phase == phBackoff && !m.closing {
		earlier(m.retryAt)
	}
	return d
}

type backoff struct {
	base, maxD, cur time.Duration
	rnd             *rand.Rand
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.maxD)
	}
	// Up to 20% jitter so that members do not retry in lockstep.
	return b.cur - time.Duration(b.rnd.Int64N(int64(b.cur)/5+1))
}

func (b *backoff) reset() { b.cur = 0 }
