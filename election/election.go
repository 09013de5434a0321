// Package election elects a single writer among the processes of a group:
// exactly one of them runs the caller's function at a time, the others stand
// by and one of them takes over when the writer goes away.
//
// The writer's function receives a fencing token, the generation in which
// the process became the writer. Tokens only grow from one writer to the next,
// so a resource that remembers the highest token it has seen (see Fence) can
// refuse a write from a former writer that has not noticed yet that it was
// replaced — a paused process, for example. Func's context also carries the
// term's Lease, whose Check refuses once the member's own loss deadline has
// passed on this process's clock, before any timer has run in a process that
// resumes from a freeze; it narrows the window, the fence closes it.
//
// Tokens grow as long as the group exists on the coordinator. A group whose
// candidates have all left is kept by cohort for the offsets retention
// (`cohort serve --offsets-retention`, 7 days by default); after that, or
// after `cohort group delete`, or on a Kafka coordinator (which removes an
// empty group without offsets within minutes), the next candidate starts a
// new group at token 1, and from then on tokens repeat those of the removed
// group: a resource that kept a higher token refuses the new writers until
// the new group's generations pass it, and then admits one whose token
// equals the recorded one, which a writer of the removed group may also
// hold. A group is removed only once its members are gone from it, but a
// process the coordinator expired may still be running: frozen (a suspended
// VM, SIGSTOP) or cut off, with a write under way. So keep a candidate
// running; after such a removal, stop every process of the former group (kill
// it, do not count on it having left) and only then clear the resource's
// record of tokens and start the candidates again.
//
// The writer keeps its role across rebalances as long as it stays in the
// group: each candidate announces in its JoinGroup metadata whether it writes
// and since which generation, and the leader's assignment keeps a current
// writer. A new writer is chosen only when no member claims the role, i.e.
// after the old writer has stopped and left, or after the coordinator expired
// it; a writer that cannot reach the coordinator stops on its own before that
// can happen (member's local loss detection). Static membership
// (member.Config.InstanceID) adds one more way, which only the token guards:
// a process started with the instance id of a writer that still runs takes
// its member's place, refuses the role it is handed with it and rejoins, and
// the role goes out again under a higher token while the replaced process
// may still write, until its next heartbeat is refused (FENCED_INSTANCE_ID)
// or its own deadline passes. Give each process its own instance id.
package election

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/member"
)

// ProtocolType and Protocol are what candidates announce in JoinGroup.
const (
	ProtocolType = "election"
	Protocol     = "single-writer-v1"
)

// Func is the writer's work. It runs only while this process is the writer and
// must return soon after ctx is cancelled (within member.Config.LostMargin
// when the role is lost). token is the fencing token of this term.
//
// A Func that returns while ctx is still live gives up the role: the process
// stops claiming it (Token returns -1) and rejoins, and the group chooses a
// writer again under a new token, preferring a candidate whose Func did not
// return on its own; with no other candidate, this process again. From the
// second short term in a row (shorter than the session timeout) on, the
// rejoin waits member.Config.RetryBackoff, doubling up to MaxRetryBackoff.
//
// ctx carries the term's Lease (LeaseOf): call its Check before each write,
// so that a process resumed after a freeze refuses before any of its timers
// has noticed that the term may be over.
type Func func(ctx context.Context, token int32)

// Config configures a candidate.
type Config struct {
	// Member holds the connection and timing settings (Client, or Brokers
	// with ClientOpts such as TLS and SASL, Group, InstanceID, timeouts,
	// Clock, Logger). The election sets the protocol and the callbacks
	// itself.
	Member member.Config
}

// Election is one candidate.
type Election struct {
	m     *member.Member
	ready chan struct{}    // closed once m and until are set (callbacks may run before)
	until func() time.Time // m.ValidUntil
	fn    Func
	log   *slog.Logger
	clk   clock.Clock

	mu      sync.Mutex
	token   int32 // current term's token; -1 when not writing
	cancel  context.CancelFunc
	stopped chan struct{} // closed when fn returns
	// refusals counts the writer assignments this process refused because
	// they were made for another member id (a static member's place taken
	// over: assigned). It is part of the claim, so that the rejoin after a
	// refusal changes this member's metadata and the coordinator rebalances
	// instead of handing the same assignment back.
	refusals uint32
	// gaveUp: this process's last term ended by Func returning on its own
	// (ended). It is part of the claim, so that the leader prefers another
	// candidate; cleared when a term starts. quits counts such terms in a
	// row that lasted less than the session timeout: from the second on,
	// the rejoin that hands the role out again waits a backoff.
	gaveUp    bool
	quits     int
	termStart time.Time
	session   time.Duration // member.Config.SessionTimeout, default applied
	backoff   [2]time.Duration
}

// Start joins the election group. fn runs whenever this process becomes the
// writer.
func Start(cfg Config, fn Func) (*Election, error) {
	if fn == nil {
		return nil, errors.New("election: nil Func")
	}
	e := &Election{fn: fn, token: -1, ready: make(chan struct{})}
	mc := cfg.Member
	e.log = mc.Logger
	e.clk = mc.Clock
	if e.clk == nil {
		e.clk = clock.Real{}
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	// member's timings, for ended's backoff.
	mc = mc.WithDefaults()
	e.session = mc.SessionTimeout
	e.backoff = [2]time.Duration{mc.RetryBackoff, mc.MaxRetryBackoff}
	mc.ProtocolType = ProtocolType
	mc.Protocols = func() []member.Protocol {
		e.mu.Lock()
		claim := encodeClaim(e.token, e.refusals, e.gaveUp)
		e.mu.Unlock()
		return []member.Protocol{{Name: Protocol, Metadata: claim}}
	}
	mc.Assign = func(_ context.Context, g member.Generation) (map[string][]byte, error) { return assign(g) }
	mc.Cooperative = true
	mc.Assigned = e.assigned
	mc.Revoked = func(member.Generation) { e.stop() }
	mc.Lost = func(member.Generation, error) { e.stop() }
	m, err := member.Start(mc)
	if err != nil {
		return nil, err
	}
	e.m, e.until = m, m.ValidUntil
	close(e.ready)
	return e, nil
}

// rejoin asks the member to rejoin, once Start has set it.
func (e *Election) rejoin() {
	<-e.ready
	e.m.Rejoin()
}

// validUntil is the member's ValidUntil, once Start has set it.
func (e *Election) validUntil() time.Time {
	<-e.ready
	return e.until()
}

// Token returns the token of the current term, or -1 when this process is not
// the writer. Like Lease.Check it reads the clock itself: from the term's
// deadline on (the member's loss deadline) it returns -1, also in a process
// that has just resumed from a freeze and whose member has not yet noticed.
// It is a status, not a permission: a write must still carry the token to a
// resource that checks it (Fence).
func (e *Election) Token() int32 {
	e.mu.Lock()
	token := e.token
	e.mu.Unlock()
	if token < 0 {
		return -1
	}
	// The clock before the deadline, as Lease.Check reads them: a deadline
	// moved in between is one the member kept.
	now := e.clk.Now()
	if until := e.validUntil(); until.IsZero() || !now.Before(until) {
		return -1
	}
	return token
}

// Close stops writing (waiting for fn to return) and leaves the group, so
// another candidate takes over after one rebalance. A static candidate
// (member.Config.InstanceID) sends no LeaveGroup: the others take over once
// the coordinator expires its session (member.Config.SessionTimeout).
func (e *Election) Close(ctx context.Context) error { return e.m.Close(ctx) }

// Abandon stops as a crash would: fn's context is cancelled and the group is
// not told; another candidate takes over once the session times out.
func (e *Election) Abandon() { e.m.Abandon() }

// Done is closed when the candidate has stopped.
func (e *Election) Done() <-chan struct{} { return e.m.Done() }

// Err is the error that stopped the candidate for good (a *member.FatalError:
// the coordinator refused its configuration, for one), or nil while it runs
// and after Close or Abandon.
func (e *Election) Err() error { return e.m.Err() }

func (e *Election) assigned(ctx context.Context, g member.Generation) {
	token, writer, forID := decodeAssignment(g.Assignment)
	e.mu.Lock()
	running := e.token >= 0
	e.mu.Unlock()
	if writer && !running && forID != "" && forID != g.MemberID {
		// The writer's role was assigned to another member id: this
		// process took over a static member's place (same instance id)
		// without a rebalance, as Kafka's static membership does, and got
		// that member's assignment. The process that had it may still be
		// writing with this token, which a fence cannot tell from ours:
		// refuse it and rejoin with changed metadata, so that the group
		// rebalances and the role goes out under a new, higher token.
		e.mu.Lock()
		e.refusals++
		e.mu.Unlock()
		e.log.Warn("refused the writer's role assigned to another member id (a static member's place taken over); rejoining for a new term",
			"member", g.MemberID, "assigned_to", forID, "token", token)
		e.rejoin()
		return
	}
	switch {
	case writer && !running:
		fctx, cancel := context.WithCancel(ctx)
		fctx = newLease(fctx, token, e.clk, e.validUntil)
		done := make(chan struct{})
		e.mu.Lock()
		e.token, e.cancel, e.stopped = token, cancel, done
		e.gaveUp, e.termStart = false, e.clk.Now()
		e.mu.Unlock()
		e.log.Info("became the writer", "member", g.MemberID, "token", token)
		go func() {
			defer close(done)
			e.fn(fctx, token)
			e.ended(fctx, done)
		}()
	case !writer && running:
		// Only if two members claimed the role: both give it up and the
		// next rebalance picks one.
		e.stop()
		e.rejoin()
	}
}

// ended gives up the role when fn returned on its own, its context still
// live (the term whose fn closes done is still the current one): the
// process stops claiming the role, marks its claim as given up, and rejoins
// with that changed claim, so that the group rebalances and chooses a
// writer again under a new token, another candidate if there is one.
// Without it, the claim would keep the role with a process that no longer
// writes, through every rebalance, for as long as it stays in the group.
// After two or more short terms in a row the rejoin waits a backoff, so
// that a Func that fails at once does not rebalance the group without
// pause when no other candidate takes the role.
func (e *Election) ended(fctx context.Context, done chan struct{}) {
	e.mu.Lock()
	own := e.stopped == done && fctx.Err() == nil
	cancel := e.cancel
	var wait time.Duration
	if own {
		e.token, e.cancel, e.stopped = -1, nil, nil
		e.gaveUp = true
		if e.clk.Now().Sub(e.termStart) < e.session {
			e.quits++
		} else {
			e.quits = 0
		}
		if e.quits > 1 {
			wait = min(e.backoff[0]<<min(e.quits-2, 20), e.backoff[1])
		}
	}
	e.mu.Unlock()
	if !own {
		return // stop cancelled it: the role went away first
	}
	cancel()
	e.log.Info("the writer's Func returned; giving up the role", "rejoin_in", wait)
	if wait == 0 {
		e.rejoin()
		return
	}
	// Not on this goroutine: a stop that raced with the return may be
	// waiting for done.
	go func() {
		<-e.ready
		t := e.clk.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C():
		case <-e.m.Done():
			return
		}
		e.mu.Lock()
		idle := e.token < 0 // no term started meanwhile
		e.mu.Unlock()
		if idle {
			e.rejoin()
		}
	}()
}

// stop cancels fn and waits for it to return.
func (e *Election) stop() {
	e.mu.Lock()
	cancel, done := e.cancel, e.stopped
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	e.mu.Lock()
	e.token, e.cancel, e.stopped = -1, nil, nil
	e.mu.Unlock()
}

// assign keeps the one member that claims the role, or when none (or more
// than one) claims it, picks the claimant-free choice: no writer while two
// claim it, otherwise the member with the smallest id, among those that did
// not give up their last term if there are any (ended), with this
// generation as token. A claim it cannot read fails the assignment (the
// leader tries again): that member may be writing, and guessing could make
// two writers.
func assign(g member.Generation) (map[string][]byte, error) {
	out := make(map[string][]byte, len(g.Members))
	var claimants []member.GroupMember
	quit := map[string]bool{}
	ids := make([]string, 0, len(g.Members))
	for _, mm := range g.Members {
		out[mm.ID] = nil
		ids = append(ids, mm.ID)
		token, gaveUp, err := decodeClaim(mm.Metadata)
		if err != nil {
			return nil, fmt.Errorf("election: member %q: %w", mm.ID, err)
		}
		if token >= 0 {
			claimants = append(claimants, mm)
		}
		if gaveUp {
			quit[mm.ID] = true
		}
	}
	switch len(claimants) {
	case 0:
		// The smallest id, preferring candidates whose last term did not
		// end by their Func returning.
		sort.SliceStable(ids, func(i, j int) bool {
			if quit[ids[i]] != quit[ids[j]] {
				return !quit[ids[i]]
			}
			return ids[i] < ids[j]
		})
		if len(ids) > 0 {
			out[ids[0]] = encodeAssignment(g.ID, ids[0])
		}
	case 1:
		token, _, _ := decodeClaim(claimants[0].Metadata)
		out[claimants[0].ID] = encodeAssignment(token, claimants[0].ID)
	default:
		// Two processes believe they write; both must stop before anyone
		// is chosen again.
	}
	return out, nil
}

// The formats, version 0 (a later layout gets a new protocol name, so that a
// group of mixed versions agrees on one both speak; a version byte other
// than 0 is refused, never guessed at):
//
//   - metadata (the claim): version byte 0, the int32 token this member
//     writes under (-1: not writing), then optionally a uint32 count of the
//     assignments it refused (assigned) and, after it, optionally a flags
//     byte (bit 0: its last term ended by its Func returning, see ended);
//   - assignment: empty (not the writer), or version byte 0, the int32
//     token, then optionally the member id the role was assigned to.
//
// The optional tails came after the first release of the format; decoders
// of that release read the first five bytes and ignore them.
func encodeClaim(token int32, refusals uint32, gaveUp bool) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0}, uint32(token))
	if refusals > 0 || gaveUp {
		b = binary.BigEndian.AppendUint32(b, refusals)
	}
	if gaveUp {
		b = append(b, 1)
	}
	return b
}

var errClaimFormat = errors.New("unreadable claim (a version byte other than 0, or shorter than 5 bytes)")

func decodeClaim(b []byte) (token int32, gaveUp bool, _ error) {
	if len(b) == 0 {
		return -1, false, nil
	}
	if len(b) < 5 || b[0] != 0 {
		return 0, false, errClaimFormat
	}
	return int32(binary.BigEndian.Uint32(b[1:5])), len(b) > 9 && b[9]&1 != 0, nil
}

func encodeAssignment(token int32, memberID string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(token)), memberID...)
}

// decodeAssignment returns the token and the member id the role was
// assigned to ("" from a leader that does not send it); writer is false for
// an empty or unreadable assignment (a newer leader's format: not writing is
// the safe reading).
func decodeAssignment(b []byte) (token int32, writer bool, memberID string) {
	if len(b) < 5 || b[0] != 0 {
		return 0, false, ""
	}
	return int32(binary.BigEndian.Uint32(b[1:5])), true, string(b[5:])
}
