package bench

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MovesConfig says what a partition-movement measurement of the consumer
// group protocol (KIP-848, server-side `uniform` assignor) does: one group
// goes through a seeded sequence of membership changes, converging after
// each, and every change is scored by how many partitions changed owner.
//
// The sequence depends only on the configuration and the seed, never on
// the target, so two targets given the same configuration see the same
// members (same ids, same subscriptions) join and leave in the same order.
type MovesConfig struct {
	// Bootstrap is the target's host:port.
	Bootstrap string
	// Members form the group before the first step (10).
	Members int
	// Steps is the number of membership changes after that (20). A step
	// has 1..MaxChange (1) members join, or as many members leave
	// gracefully (a heartbeat with epoch -1); never fewer than one member
	// stays. A change of several members arrives as several heartbeats,
	// and both cohort and kfake compute a new target assignment after
	// each, from the previous target: the step's moves are then those of
	// a chain of plans, and can exceed MoveStep.Min, the minimum for the
	// whole change at once.
	Steps, MaxChange int
	// Topics of Partitions partitions each (1 × 100).
	Topics, Partitions int
	// Hetero: every member subscribes to a seeded, non-empty random subset
	// of the topics (each with probability 1/2); otherwise every member
	// subscribes to all of them.
	Hetero bool
	// Seed of the sequence.
	Seed uint64
	// Timeout bounds the whole run (5 min); MaxRounds the heartbeat rounds
	// of one convergence (100).
	Timeout   time.Duration
	MaxRounds int
	// Prefix starts the group and topic names.
	Prefix string
	// Logf reports progress (nil = quiet).
	Logf func(format string, args ...any)
}

func (c *MovesConfig) validate() error {
	if c.Bootstrap == "" {
		return errors.New("bench: no bootstrap address")
	}
	defInt(&c.Members, 10)
	defInt(&c.Steps, 20)
	defInt(&c.MaxChange, 1)
	defInt(&c.Topics, 1)
	defInt(&c.Partitions, 100)
	defInt(&c.MaxRounds, 100)
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("moves-%d", time.Now().UnixNano())
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// MoveChange is one step of the sequence: members joining (with their
// subscriptions, as topic indexes) or the ids of members leaving.
type MoveChange struct {
	Join  []MoveMember
	Leave []string
}

// MoveMember is a member as the sequence defines it.
type MoveMember struct {
	ID     string
	Topics []int
}

// MoveSequence is the sequence cfg defines: the initial members as
// change 0, then cfg.Steps changes.
func MoveSequence(cfg MovesConfig) []MoveChange {
	cfg.validate()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b6970383438)) // "kip848"
	newMember := func() MoveMember {
		var raw [16]byte // a client-made member id (v1), as a UUID in base64
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		m := MoveMember{ID: base64.RawURLEncoding.EncodeToString(raw[:])}
		for t := range cfg.Topics {
			if !cfg.Hetero || rng.IntN(2) == 0 {
				m.Topics = append(m.Topics, t)
			}
		}
		if len(m.Topics) == 0 {
			m.Topics = []int{rng.IntN(cfg.Topics)}
		}
		return m
	}
	var seq []MoveChange
	var live []string
	first := MoveChange{}
	for range cfg.Members {
		m := newMember()
		first.Join = append(first.Join, m)
		live = append(live, m.ID)
	}
	seq = append(seq, first)
	for range cfg.Steps {
		k := 1 + rng.IntN(cfg.MaxChange)
		var ch MoveChange
		if rng.IntN(2) == 0 && len(live) > k {
			for range k {
				i := rng.IntN(len(live))
				ch.Leave = append(ch.Leave, live[i])
				live = slices.Delete(live, i, i+1)
			}
		} else {
			for range k {
				m := newMember()
				ch.Join = append(ch.Join, m)
				live = append(live, m.ID)
			}
		}
		seq = append(seq, ch)
	}
	return seq
}

// MoveStep is the outcome of one change of the sequence.
type MoveStep struct {
	Joined, Left, Members int
	// Moves: partitions owned before the change whose owner after it (the
	// group converged both times) is another member or none. Partitions
	// nobody owned before (a topic without subscribers until now) are not
	// moves.
	Moves int
	// Min is the fewest moves a balanced plan (per-member counts within
	// one) needs, with homogeneous subscriptions (-1 otherwise): with T
	// partitions, N members, q = T/N, r = T mod N and lᵢ the partitions
	// member i owned before (0 for a member that just joined),
	// T − Σ min(lᵢ, q) − min(r, #{lᵢ > q}). Every balanced plan moves at
	// least Min; an exact sticky assignor moves exactly Min when the
	// change is one member (see MovesConfig.Steps for larger changes).
	Min int
	// Spread is max − min partitions per member after the change; SumSq
	// the sum of the squared per-member counts (lower is more even: the
	// quantity cohort's `uniform` minimises, whatever the subscriptions).
	Spread int
	SumSq  int64
	// Heartbeats sent until converged, in Rounds rounds.
	Heartbeats, Rounds int
	Elapsed            time.Duration
}

// MovesResult is one target's run: Initial is change 0 (the group
// forming), Steps the rest.
type MovesResult struct {
	Target  string
	Initial MoveStep
	Steps   []MoveStep
}

// Total is the sum of the steps' moves and minimums (the minimum -1 when
// not computed).
func (r *MovesResult) Total() (moves, minimum int) {
	for _, s := range r.Steps {
		moves += s.Moves
		if s.Min < 0 || minimum < 0 {
			minimum = -1
		} else {
			minimum += s.Min
		}
	}
	return moves, minimum
}

// mmember is a member of a moves run.
type mmember struct {
	MoveMember
	epoch  int32
	owned  []tpart // sorted by compareTpart
	report bool    // the next heartbeat lists owned
}

// mgroup is the one group of a moves run, driven through one connection,
// one heartbeat at a time.
type mgroup struct {
	cfg     MovesConfig
	name    string
	topics  []string
	admin   *kgo.Client
	rc      *rawConn
	version int16
	live    []*mmember // in join order
}

// RunMoves applies MoveSequence(cfg) to a new group on cfg.Bootstrap and
// scores every change. Each step writes the change's heartbeats (joins:
// epoch 0 with the subscription and the `uniform` assignor; leaves: epoch
// -1), then runs rounds in which every member heartbeats once (listing
// what it owns when that changed; a member adopts every assignment an
// answer carries at once) until a round changes nothing and
// ConsumerGroupDescribe shows the group converged: Stable, all epochs
// equal, every member's assignment and target what it owns.
func RunMoves(ctx context.Context, name string, cfg MovesConfig) (*MovesResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	g := &mgroup{cfg: cfg, name: cfg.Prefix}
	var err error
	if g.admin, err = newClient(cfg.Bootstrap, "moves-admin", nil); err != nil {
		return nil, err
	}
	defer g.admin.Close()
	for t := range cfg.Topics {
		topic := fmt.Sprintf("%s-t%d", cfg.Prefix, t)
		if err := createTopic(ctx, g.admin, topic, cfg.Partitions); err != nil {
			return nil, err
		}
		defer deleteTopic(ctx, g.admin, topic)
		g.topics = append(g.topics, topic)
	}
	coord, err := coordinatorAddr(ctx, g.admin, g.name)
	if err != nil {
		return nil, err
	}
	if g.rc, err = dialRaw(ctx, coord, "moves", nil); err != nil {
		return nil, err
	}
	defer g.rc.Close()
	if g.version, err = g.rc.version(kmsg.NewPtrConsumerGroupHeartbeatRequest(), 1); err == nil && g.version < 1 {
		err = errors.New("target does not serve ConsumerGroupHeartbeat v1")
	}
	if err != nil {
		return nil, err
	}
	res := &MovesResult{Target: name}
	for i, ch := range MoveSequence(cfg) {
		st, err := g.step(ctx, ch)
		if err != nil {
			return res, fmt.Errorf("%s, step %d: %w", name, i, err)
		}
		cfg.Logf("%s: step %d: +%d −%d → %d members: %d moved (minimum %d), spread %d, %d heartbeats in %d rounds, %v",
			name, i, st.Joined, st.Left, st.Members, st.Moves, st.Min, st.Spread, st.Heartbeats, st.Rounds, st.Elapsed.Round(time.Millisecond))
		if i == 0 {
			res.Initial = st
		} else {
			res.Steps = append(res.Steps, st)
		}
	}
	for _, m := range g.live {
		if _, err := g.heartbeat(ctx, m, true); err != nil {
			return res, fmt.Errorf("%s, leaving: %w", name, err)
		}
	}
	return res, nil
}

// step applies ch, lets the group converge and scores the change.
func (g *mgroup) step(ctx context.Context, ch MoveChange) (MoveStep, error) {
	start := time.Now()
	before := g.owners()
	st := MoveStep{Joined: len(ch.Join), Left: len(ch.Leave), Min: -1}
	hbs := 0
	for _, id := range ch.Leave {
		i := slices.IndexFunc(g.live, func(m *mmember) bool { return m.ID == id })
		if i < 0 {
			return st, fmt.Errorf("leaving member %s is not in the group", id)
		}
		if _, err := g.heartbeat(ctx, g.live[i], true); err != nil {
			return st, err
		}
		hbs++
		g.live = slices.Delete(g.live, i, i+1)
	}
	for _, jm := range ch.Join {
		m := &mmember{MoveMember: jm}
		g.live = append(g.live, m)
		if _, err := g.heartbeat(ctx, m, false); err != nil {
			return st, err
		}
		hbs++
	}
	if !g.cfg.Hetero {
		st.Min = g.minimum(before)
	}
	converged := false
	for !converged {
		if st.Rounds++; st.Rounds > g.cfg.MaxRounds {
			return st, fmt.Errorf("not converged after %d heartbeat rounds", g.cfg.MaxRounds)
		}
		changed := false
		for _, m := range g.live {
			c, err := g.heartbeat(ctx, m, false)
			if err != nil {
				return st, err
			}
			hbs++
			changed = changed || c
		}
		if !changed {
			err := g.describe(ctx)
			converged = err == nil
			if !converged && st.Rounds == g.cfg.MaxRounds {
				return st, err
			}
		}
	}
	after, err := g.checkOwners()
	if err != nil {
		return st, err
	}
	for p, was := range before {
		if after[p] != was {
			st.Moves++
		}
	}
	st.Members, st.Heartbeats, st.Elapsed = len(g.live), hbs, time.Since(start)
	lo, hi := -1, 0
	for _, m := range g.live {
		n := len(m.owned)
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
		st.SumSq += int64(n) * int64(n)
	}
	st.Spread = hi - max(lo, 0)
	return st, nil
}

// owners maps every owned partition to its owner's id.
func (g *mgroup) owners() map[tpart]string {
	o := map[tpart]string{}
	for _, m := range g.live {
		for _, p := range m.owned {
			o[p] = m.ID
		}
	}
	return o
}

// checkOwners is owners, failing if a partition has two owners, or (with
// homogeneous subscriptions) if one of the topics' partitions has none.
func (g *mgroup) checkOwners() (map[tpart]string, error) {
	o := g.owners()
	n := 0
	for _, m := range g.live {
		n += len(m.owned)
	}
	if n != len(o) {
		return nil, fmt.Errorf("%d partitions owned by %d members: some twice", len(o), n)
	}
	if want := g.cfg.Topics * g.cfg.Partitions; !g.cfg.Hetero && len(o) != want {
		return nil, fmt.Errorf("%d partitions owned, want %d", len(o), want)
	}
	return o, nil
}

// minimum is the fewest moves a balanced plan for the current members
// needs, given who owned what before (homogeneous subscriptions).
func (g *mgroup) minimum(before map[tpart]string) int {
	total, n := g.cfg.Topics*g.cfg.Partitions, len(g.live)
	held := map[string]int{}
	for _, id := range before {
		held[id]++
	}
	q, r := total/n, total%n
	kept, over := 0, 0
	for _, m := range g.live {
		l := held[m.ID]
		kept += min(l, q)
		if l > q {
			over++
		}
	}
	return total - kept - min(r, over)
}

// heartbeat sends m's next heartbeat (its leave if leave) and applies the
// answer; it tells whether m's epoch or assignment changed.
func (g *mgroup) heartbeat(ctx context.Context, m *mmember, leave bool) (bool, error) {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = g.version
	r.Group = g.name
	r.MemberID = m.ID
	r.MemberEpoch = m.epoch
	r.RebalanceTimeoutMillis = -1
	switch {
	case leave:
		r.MemberEpoch = -1
	case m.epoch == 0:
		r.RebalanceTimeoutMillis = 60000
		for _, t := range m.Topics {
			r.SubscribedTopicNames = append(r.SubscribedTopicNames, g.topics[t])
		}
		r.ServerAssignor = kmsg.StringPtr("uniform")
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	case m.report:
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for i, p := range m.owned {
			if i == 0 || p.topic != m.owned[i-1].topic {
				t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
				t.TopicID = p.topic
				r.Topics = append(r.Topics, t)
			}
			t := &r.Topics[len(r.Topics)-1]
			t.Partitions = append(t.Partitions, p.p)
		}
		m.report = false
	}
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	if err := g.rc.do(ctx, r, resp); err != nil {
		return false, err
	}
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = ": " + *resp.ErrorMessage
		}
		return false, fmt.Errorf("member %s at epoch %d: %w%s", m.ID, m.epoch, kerr.ErrorForCode(resp.ErrorCode), msg)
	}
	if leave {
		m.owned = nil
		return true, nil
	}
	changed := resp.MemberEpoch != m.epoch
	m.epoch = resp.MemberEpoch
	if a := resp.Assignment; a != nil {
		var next []tpart
		for _, t := range a.Topics {
			for _, p := range t.Partitions {
				next = append(next, tpart{t.TopicID, p})
			}
		}
		slices.SortFunc(next, compareTpart)
		if !slices.Equal(next, m.owned) {
			m.owned, m.report, changed = next, true, true
		}
	}
	return changed, nil
}

func (g *mgroup) describe(ctx context.Context) error {
	views := make(map[string]memberView, len(g.live))
	for _, m := range g.live {
		views[m.ID] = memberView{epoch: m.epoch, owned: m.owned}
	}
	return describeConverged(ctx, g.admin, g.name, views)
}
