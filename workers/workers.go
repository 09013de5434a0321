// Package workers runs a pool of named resources (connectors, tasks, shards)
// over the processes of a group, Kafka Connect style: each resource runs on
// exactly one process, resources move as little as possible when processes
// come and go, and a resource that moves is stopped on its old owner before
// it starts on its new one.
//
// The hand-off is cooperative (incremental) and spans two rebalances. Every
// member announces in its JoinGroup metadata the resources it runs. The
// leader never assigns a resource that another member still announces; when
// the balance requires a move, the first rebalance only takes the resource
// away from its owner, which stops it and rejoins at once, and the second
// rebalance hands it to its new owner. Resources of members that left or were
// expired are free at once. A member that cannot reach the coordinator stops
// its resources on its own before the coordinator can drop it (its session,
// or a shorter rebalance timeout; see package member).
//
// A process that joins and takes resources over therefore costs the group
// two rebalances, and each Rejoin at least one. A cohort node flags a group
// that rebalances more than 10 times in 5 minutes (cohort serve
// --rebalance-storm), which a pool's deploys and scale-outs reach easily:
// docs/workdist.md in cohort's repository says what to set.
//
// # Validity and fencing
//
// That local stop protects from a process that keeps running; it cannot
// protect from one that does not run. A process frozen past its session (a
// SIGSTOP, a long GC or swap pause, a suspended VM) has its resources handed
// to other members while it is stopped, and when it resumes its resource
// loops can run before its member has noticed (no timer has run yet).
//
// Each resource run therefore carries a Lease (LeaseOf on the context given
// to Config.Start): its Token, the resource and the generation in which this
// member got it, and a deadline on this process's monotonic clock, LostMargin
// before the coordinator could expire the member (the session timeout, or a
// shorter rebalance timeout, after the send time of the last confirmed
// heartbeat; see member.Member.ValidUntil). Call Lease.Check before each
// unit of work: it refuses once the deadline has passed, reading the clock
// itself, so a resumed process refuses before any of its timers has run.
//
// The check narrows the window but cannot close it: a process can be frozen
// between a successful Check and the write that follows, and resume after
// another member has started the resource with a newer token. The token is
// the only protection from a process frozen past its deadline: the store the
// resource writes to must keep the highest generation per resource and refuse
// older tokens in the same atomic step as the write (Fence shows the rule).
// Without such a store, a resource can run twice for a moment.
//
// The resource list comes from a callback on the leader, read at every
// rebalance; call Pool.Rejoin to make the group pick up a change. Resources
// may have weights; the leader balances the total weight per member.
package workers

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/cohort-dev/cohort/clock"
	"github.com/cohort-dev/cohort/member"
)

// ProtocolType and Protocol are what pool members announce in JoinGroup.
const (
	ProtocolType = "workers"
	Protocol     = "incremental-v1"
)

// Resource is one unit of work.
type Resource struct {
	// Name identifies the resource; at most 65,535 bytes (the leader
	// leaves a resource with a longer name out of the plan and logs it).
	Name string
	// Weight is the relative cost of the resource (0 counts as 1).
	Weight int
}

// Config configures a pool member.
type Config struct {
	// Member holds the connection and timing settings (Client, or Brokers
	// with ClientOpts such as TLS and SASL, Group, InstanceID, timeouts,
	// Clock, Logger). The pool sets the protocol and the callbacks
	// itself.
	Member member.Config
	// Resources lists every resource; it is called on the leader at each
	// rebalance. Every member should be able to call it.
	Resources func(ctx context.Context) ([]Resource, error)
	// Start is called when a resource starts on this member. ctx is
	// cancelled when it must stop (before Stop is called) and carries the
	// resource's Lease (LeaseOf): check it before each unit of work. token
	// is the generation in which this member got the resource (the
	// Generation of the lease's Token). Start should return promptly.
	// Start and Stop are called one at a time and must not call the Pool's
	// methods.
	Start func(ctx context.Context, name string, token int32)
	// Stop is called when the resource stops on this member (moved away,
	// membership lost, Close). When it returns the resource must no longer
	// run. While this member keeps its membership, no other member starts
	// the resource before Stop has returned. A Stop that blocks also blocks
	// this member's rejoin, and a member that cannot rejoin a rebalance
	// within the rebalance timeout gives up its membership: its resources'
	// contexts are then cancelled (member.ErrSessionLost) LostMargin
	// before the coordinator can hand them on, whether Stop has returned
	// or not. So stop within member.Config.LostMargin of the context's
	// cancellation; only the token (Fence) covers a run that goes on.
	Stop func(name string)
}

// Pool is one member of a worker pool.
type Pool struct {
	cfg   Config
	m     *member.Member
	ready chan struct{} // closed once m is set
	clk   clock.Clock
	log   *slog.Logger

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	workCtx context.Context // the member context the running resources belong to
	// refusals counts the assignments refused because they were made for
	// another member id (a static member's place taken over: assigned),
	// and the rejoins asked for (Rejoin). It is part of the metadata, so
	// that such a rejoin changes it and the coordinator rebalances instead
	// of handing the same assignment back.
	refusals uint32
	// rejoinAsked: Rejoin was called and no JoinGroup has carried the
	// metadata since (Protocols clears it); assigned rejoins again.
	rejoinAsked bool
}

// Start joins the pool.
func Start(cfg Config) (*Pool, error) {
	if cfg.Resources == nil || cfg.Start == nil || cfg.Stop == nil {
		return nil, errors.New("workers: Resources, Start and Stop are required")
	}
	p := &Pool{cfg: cfg, running: map[string]context.CancelCauseFunc{}, ready: make(chan struct{})}
	mc := cfg.Member
	p.log = mc.Logger
	if p.log == nil {
		p.log = slog.Default()
	}
	p.clk = mc.Clock
	if p.clk == nil {
		p.clk = clock.Real{}
	}
	mc.ProtocolType = ProtocolType
	mc.Protocols = func() []member.Protocol {
		owned := p.Owned()
		p.mu.Lock()
		refusals := p.refusals
		p.rejoinAsked = false // this JoinGroup carries the metadata as it is now
		p.mu.Unlock()
		return []member.Protocol{{Name: Protocol, Metadata: encodeMetadata(owned, refusals)}}
	}
	mc.Assign = p.assign
	mc.Cooperative = true
	mc.Assigned = p.assigned
	mc.Revoked = func(member.Generation) { p.stopAll() }
	mc.Lost = func(member.Generation, error) { p.stopAll() }
	m, err := member.Start(mc)
	if err != nil {
		return nil, err
	}
	p.m = m
	close(p.ready)
	return p, nil
}

// member returns the member once Start has set it (callbacks may run before).
func (p *Pool) member() *member.Member {
	<-p.ready
	return p.m
}

// Owned returns the resources running on this member, sorted.
func (p *Pool) Owned() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.running))
	for n := range p.running {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Causes of a resource context's cancellation (membership causes, such as
// member.ErrSessionLost, come from the member's context).
var (
	errMovedAway = errors.New("workers: resource no longer assigned to this member")
	errStopping  = errors.New("workers: member stopping its resources")
)

// Rejoin triggers a rebalance, for example after the resource list changed,
// whichever member calls it. A member rejoining with the metadata it had is
// handed its assignment back without a rebalance (Kafka's rule for a
// follower), so the rejoin changes the member's metadata (the count in its
// tail): the coordinator then rebalances, and the leader reads the resource
// list again.
//
// A Rejoin during a rebalance, after this member's JoinGroup went out (its
// metadata without the change), is made again once the rebalance completes:
// the member's own Rejoin does nothing while it is rejoining.
func (p *Pool) Rejoin() {
	p.mu.Lock()
	p.refusals++
	p.rejoinAsked = true
	p.mu.Unlock()
	p.member().Rejoin()
}

// Close stops this member's resources and leaves the group; the others take
// them over after one rebalance. A static member (member.Config.InstanceID)
// sends no LeaveGroup: its resources move once the coordinator expires its
// session (member.Config.SessionTimeout).
func (p *Pool) Close(ctx context.Context) error { return p.m.Close(ctx) }

// Abandon stops as a crash would: resources are stopped, the group is not
// told and takes them over once the session times out.
func (p *Pool) Abandon() { p.m.Abandon() }

// Done is closed when the member has stopped.
func (p *Pool) Done() <-chan struct{} { return p.m.Done() }

// Err is the error that stopped the member for good (a *member.FatalError:
// the coordinator refused its configuration, for one), or nil while it runs
// and after Close or Abandon.
func (p *Pool) Err() error { return p.m.Err() }

func (p *Pool) assigned(ctx context.Context, g member.Generation) {
	p.mu.Lock()
	again := p.rejoinAsked // a Rejoin this generation's JoinGroup did not carry
	p.mu.Unlock()
	if again {
		defer p.member().Rejoin()
	}
	names, forID, err := decodeAssignment(g.Assignment)
	if err != nil {
		p.log.Error("bad assignment; rejoining", "err", err)
		p.member().Rejoin()
		return
	}
	if len(names) > 0 && forID != "" && forID != g.MemberID {
		// Resources assigned to another member id: this process took over
		// a static member's place (same instance id) without a
		// rebalance, as Kafka's static membership does, and got that
		// member's assignment. The process that had it may still run
		// those resources with this generation's tokens, which a fence
		// cannot tell from ours: refuse it and rejoin with changed
		// metadata, so that the group rebalances and the resources go out
		// under a new generation.
		p.stopAll()
		p.mu.Lock()
		p.refusals++
		p.mu.Unlock()
		p.log.Warn("refused resources assigned to another member id (a static member's place taken over); rejoining for a new generation",
			"member", g.MemberID, "assigned_to", forID, "resources", len(names))
		p.member().Rejoin()
		return
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	p.mu.Lock()
	if p.workCtx != ctx {
		// A new membership: stop everything as soon as it ends, without
		// waiting for the member's goroutine to deliver Lost.
		p.workCtx = ctx
		context.AfterFunc(ctx, p.stopAll)
	}
	revoked := false
	for n, cancel := range p.running {
		if !want[n] {
			cancel(errMovedAway)
			p.cfg.Stop(n)
			delete(p.running, n)
			revoked = true
		}
	}
	if ctx.Err() == nil {
		for _, n := range names {
			if _, ok := p.running[n]; !ok {
				rctx, cancel := context.WithCancelCause(ctx)
				rctx, _ = newLease(rctx, Token{Resource: n, Generation: g.ID}, p.clk, p.member().ValidUntil)
				p.running[n] = cancel
				p.cfg.Start(rctx, n, g.ID)
			}
		}
	}
	p.mu.Unlock()
	if revoked {
		// The leader hands the revoked resources out in the next round.
		p.member().Rejoin()
	}
}

func (p *Pool) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.running))
	for n := range p.running {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p.running[n](errStopping)
		p.cfg.Stop(n)
		delete(p.running, n)
	}
}

func (p *Pool) assign(ctx context.Context, g member.Generation) (map[string][]byte, error) {
	res, err := p.cfg.Resources(ctx)
	if err != nil {
		return nil, fmt.Errorf("workers: listing resources: %w", err)
	}
	res = p.encodable(res)
	owned := make(map[string][]string, len(g.Members))
	for _, mm := range g.Members {
		names, _, err := decodeNamesRest(mm.Metadata)
		if err != nil {
			// What that member runs is unknown: planning as if it ran
			// nothing could start its resources elsewhere. The leader
			// tries again (member's backoff) until the member leaves or
			// speaks a format the leader reads.
			return nil, fmt.Errorf("workers: member %q: unreadable metadata: %w", mm.ID, err)
		}
		owned[mm.ID] = names
	}
	plan := Plan(owned, res)
	out := make(map[string][]byte, len(plan))
	for id, names := range plan {
		out[id] = encodeAssignment(names, id)
	}
	return out, nil
}

// maxNameLen is the longest resource name the metadata and assignment
// encoding carries (a 16-bit length).
const maxNameLen = math.MaxUint16

// encodable returns res without the resources whose names are too long to
// encode, logging each one left out: a name that cannot be sent would
// otherwise corrupt the whole assignment (every member would fail to decode
// it and rejoin, round after round), while leaving it out lets the others
// run. The name is logged by its length and first bytes only.
func (p *Pool) encodable(res []Resource) []Resource {
	out := res
	for i, r := range res {
		if len(r.Name) <= maxNameLen {
			if len(out) < len(res) {
				out = append(out, r)
			}
			continue
		}
		if len(out) == len(res) {
			out = slices.Clone(res[:i])
		}
		p.log.Error("resource left out: its name is longer than a pool can carry",
			"bytes", len(r.Name), "max", maxNameLen, "prefix", r.Name[:64])
	}
	return out
}

// Plan is the leader's assignment. owned maps every member to the resources
// it runs now. The result maps every member to the resources it may run in
// the new generation: everything it owns and may keep, plus free resources.
// A resource owned by one member is never given to another; a resource the
// balance wants elsewhere is left out (revoked) and handed over next round.
// A resource claimed by two members is left out for both.
//
// Balance: free resources go, heaviest first, to the least loaded member;
// then, while moving a resource from the most to the least loaded member
// lowers the maximum load, the heaviest such resource moves (freely if it
// was free this round, by revocation otherwise). With equal weights this
// gives every member ⌊n/m⌋ or ⌈n/m⌉ resources and moves only the resources
// that must move.
func Plan(owned map[string][]string, resources []Resource) map[string][]string {
	weight := make(map[string]int, len(resources))
	for _, r := range resources {
		weight[r.Name] = max(r.Weight, 1)
	}
	ids := make([]string, 0, len(owned))
	for id := range owned {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make(map[string][]string, len(ids))
	if len(ids) == 0 {
		return out
	}
	claims := map[string]int{}
	for _, id := range ids {
		for _, n := range dedup(owned[id]) {
			claims[n]++
		}
	}
	type slot struct {
		name    string
		free    bool // assigned from the free pool this round
		pending bool // revoked from its owner, to be handed here next round
	}
	have := make(map[string][]slot, len(ids))
	load := make(map[string]int, len(ids))
	for _, id := range ids {
		for _, n := range dedup(owned[id]) {
			if w, ok := weight[n]; ok && claims[n] == 1 {
				have[id] = append(have[id], slot{name: n})
				load[id] += w
			}
		}
	}
	var free []string
	for _, r := range resources {
		if claims[r.Name] == 0 {
			free = append(free, r.Name)
		}
	}
	free = dedup(free)
	sort.SliceStable(free, func(i, j int) bool { return weight[free[i]] > weight[free[j]] })
	minLoaded := func() string {
		best := ids[0]
		for _, id := range ids[1:] {
			if load[id] < load[best] {
				best = id
			}
		}
		return best
	}
	maxLoaded := func() string {
		best := ids[0]
		for _, id := range ids[1:] {
			if load[id] > load[best] {
				best = id
			}
		}
		return best
	}
	for _, n := range free {
		id := minLoaded()
		have[id] = append(have[id], slot{name: n, free: true})
		load[id] += weight[n]
	}
	// Balancing moves; each strictly lowers the sum of squared loads, so
	// this ends; the bound only guards against a bug.
	for range len(resources) * len(ids) {
		hi, lo := maxLoaded(), minLoaded()
		gap := load[hi] - load[lo]
		best := -1
		for i, s := range have[hi] {
			w := weight[s.name]
			if w >= gap {
				continue
			}
			cheap := s.free || s.pending // moving it revokes nothing more
			if best < 0 || w > weight[have[hi][best].name] ||
				w == weight[have[hi][best].name] && cheap && !(have[hi][best].free || have[hi][best].pending) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		s := have[hi][best]
		have[hi] = slices.Delete(have[hi], best, best+1)
		load[hi] -= weight[s.name]
		load[lo] += weight[s.name]
		if !s.free {
			// Revoked now, free next round; counted at lo so that the plan
			// does not take more from others meanwhile.
			s.pending = true
		}
		have[lo] = append(have[lo], s)
	}
	for _, id := range ids {
		names := []string{}
		for _, s := range have[id] {
			if !s.pending {
				names = append(names, s.name)
			}
		}
		sort.Strings(names)
		out[id] = names
	}
	return out
}

func dedup(ns []string) []string {
	seen := make(map[string]bool, len(ns))
	out := ns[:0:0]
	for _, n := range ns {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// The formats, version 0 (a later layout gets a new protocol name, so that a
// pool of mixed versions agrees on one all its members speak; a version byte
// other than 0 is refused, never guessed at). Both start with the names:
// version byte 0, uint32 count, then each name as uint16 length + bytes.
// Then, optionally:
//
//   - metadata: a uint32 count of the assignments this member refused
//     (assigned);
//   - assignment: a uint16 length and the member id it was made for.
//
// The optional tails came after the first release of the format; decoders
// of that release ignore bytes after the names.
func encodeMetadata(owned []string, refusals uint32) []byte {
	b := encodeNames(owned)
	if refusals > 0 {
		b = binary.BigEndian.AppendUint32(b, refusals)
	}
	return b
}

func encodeAssignment(names []string, memberID string) []byte {
	b := encodeNames(names)
	if len(memberID) <= math.MaxUint16 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(memberID)))
		b = append(b, memberID...)
	}
	return b
}

// decodeAssignment returns the names and the member id the assignment was
// made for ("" from a leader that does not send it).
func decodeAssignment(b []byte) ([]string, string, error) {
	names, rest, err := decodeNamesRest(b)
	if err != nil || len(rest) < 2 {
		return names, "", err
	}
	l := int(binary.BigEndian.Uint16(rest))
	if len(rest)-2 < l {
		return nil, "", errMalformed
	}
	return names, string(rest[2 : 2+l]), nil
}

func encodeNames(names []string) []byte {
	b := []byte{0}
	b = binary.BigEndian.AppendUint32(b, uint32(len(names)))
	for _, n := range names {
		b = binary.BigEndian.AppendUint16(b, uint16(len(n)))
		b = append(b, n...)
	}
	return b
}

var errMalformed = errors.New("workers: malformed names")

func decodeNames(b []byte) ([]string, error) {
	names, _, err := decodeNamesRest(b)
	return names, err
}

// decodeNamesRest decodes the names at the start of b and returns the bytes
// after them.
func decodeNamesRest(b []byte) ([]string, []byte, error) {
	if len(b) == 0 {
		return nil, nil, nil
	}
	if len(b) < 5 || b[0] != 0 {
		return nil, nil, errMalformed
	}
	n := binary.BigEndian.Uint32(b[1:5])
	b = b[5:]
	if uint64(n) > uint64(len(b))/2 {
		return nil, nil, errMalformed
	}
	out := make([]string, 0, n)
	for range n {
		if len(b) < 2 {
			return nil, nil, errMalformed
		}
		l := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if len(b) < l {
			return nil, nil, errMalformed
		}
		out = append(out, string(b[:l]))
		b = b[l:]
	}
	return out, b, nil
}
