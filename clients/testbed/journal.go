package testbed

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/server"
)

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Join is one successful JoinGroup answer as the router (or a node's Tap)
// saw it.
type Join struct {
	Gen        int32
	Member     string
	Instance   string
	Protocol   string
	Leader     string
	ClientID   string // the JoinGroup request's client id
	Version    int16
	At         time.Time // when the answer came back
	Requested  time.Time // when the request reached the router
	Rebalanced bool      // the answer carried a member list (the leader)
}

// Commit is one acknowledged partition of an OffsetCommit.
type Commit struct {
	TP
	Offset    int64
	Gen       int32
	Member    string
	At        time.Time // when the answer came back
	Requested time.Time // when the request reached the router
}

// Fetch is one partition of a successful OffsetFetch answer.
type Fetch struct {
	TP
	Offset    int64
	Requested time.Time // when the request reached the router
	At        time.Time // when the answer came back
}

// Journal records, per group, what cohort acknowledged to the clients behind
// the router: joins, the assignments delivered by SyncGroup, commits, and the
// committed offsets OffsetFetch answered.
type Journal struct {
	mu      sync.Mutex
	ptype   map[string]string                         // group → protocol type
	joins   map[string][]Join                         // group → joins in answer order
	assign  map[string]map[int32]map[string][]TP      // group → gen → member → assignment
	commits map[string][]Commit                       // group → acknowledged commits in answer order
	fetches map[string][]Fetch                        // group → fetched offsets in answer order
	sent    map[string][]Commit                       // group → every commit request, answered or not (At unset)
	failed  map[string][]string                       // group → refused commits
	decode  []string                                  // assignment decoding failures
	syncAt  map[string]map[int32]map[string]time.Time // when each member got its assignment
}

// NewJournal returns an empty journal. The router feeds its own; a bare
// cohort node feeds one through its Tap (Journal.Tap).
func NewJournal() *Journal {
	return &Journal{
		ptype:   map[string]string{},
		joins:   map[string][]Join{},
		assign:  map[string]map[int32]map[string][]TP{},
		commits: map[string][]Commit{},
		fetches: map[string][]Fetch{},
		sent:    map[string][]Commit{},
		failed:  map[string][]string{},
		syncAt:  map[string]map[int32]map[string]time.Time{},
	}
}

// observe records a group request forwarded by the router and cohort's
// raw answer.
func (j *Journal) observe(clientID string, req kmsg.Request, raw []byte, requested time.Time) {
	resp, err := decodeResponse(req, raw)
	if err != nil {
		j.mu.Lock()
		j.decode = append(j.decode, fmt.Sprintf("decoding %T: %v", resp, err))
		j.mu.Unlock()
		return
	}
	j.Observe(clientID, req, resp, requested, time.Now())
}

// Tap records a request a cohort node answered, with its answer: it is a
// node.Config.Tap, for clients that talk to the node directly. The node
// calls it once the answer is written, so its time stands for both the
// request's arrival (Requested) and the answer (At): the checks that order
// requests of different connections by time (CheckCommitFencing,
// CheckFetchesSeeCommits) are then exact only up to the node's handling
// time of one request.
func (j *Journal) Tap(c server.Client, req kmsg.Request, resp kmsg.Response) {
	now := time.Now()
	if q, ok := req.(*kmsg.OffsetCommitRequest); ok {
		j.sentCommit(q, now)
	}
	j.Observe(c.ID, req, resp, now, now)
}

// Observe records one group request (JoinGroup, SyncGroup, OffsetCommit,
// OffsetFetch; others are ignored) of the client clientID and cohort's
// answer to it: requested is when the request reached cohort (or the
// router), answered when the answer came back.
func (j *Journal) Observe(clientID string, req kmsg.Request, resp kmsg.Response, requested, answered time.Time) {
	now := answered
	j.mu.Lock()
	defer j.mu.Unlock()
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		j.ptype[q.Group] = q.ProtocolType
		p, ok := resp.(*kmsg.JoinGroupResponse)
		if !ok || p.ErrorCode != 0 {
			return
		}
		jn := Join{Gen: p.Generation, Member: p.MemberID, Leader: p.LeaderID, Version: q.Version, At: now, Requested: requested,
			Rebalanced: len(p.Members) > 0, ClientID: clientID}
		if q.InstanceID != nil {
			jn.Instance = *q.InstanceID
		}
		if p.Protocol != nil {
			jn.Protocol = *p.Protocol
		}
		j.joins[q.Group] = append(j.joins[q.Group], jn)
	case *kmsg.SyncGroupRequest:
		p, ok := resp.(*kmsg.SyncGroupResponse)
		if !ok || p.ErrorCode != 0 {
			return
		}
		var tps []TP
		if j.ptype[q.Group] == "consumer" || (q.ProtocolType != nil && *q.ProtocolType == "consumer") {
			var err error
			tps, err = decodeAssignment(p.MemberAssignment)
			if err != nil {
				j.decode = append(j.decode, fmt.Sprintf("group %s gen %d member %s: assignment %x: %v", q.Group, q.Generation, q.MemberID, p.MemberAssignment, err))
			}
		}
		g := j.assign[q.Group]
		if g == nil {
			g = map[int32]map[string][]TP{}
			j.assign[q.Group] = g
			j.syncAt[q.Group] = map[int32]map[string]time.Time{}
		}
		if g[q.Generation] == nil {
			g[q.Generation] = map[string][]TP{}
			j.syncAt[q.Group][q.Generation] = map[string]time.Time{}
		}
		g[q.Generation][q.MemberID] = tps
		j.syncAt[q.Group][q.Generation][q.MemberID] = now
	case *kmsg.OffsetFetchRequest:
		p, ok := resp.(*kmsg.OffsetFetchResponse)
		if !ok {
			return
		}
		add := func(group, topic string, part int32, off int64) {
			j.fetches[group] = append(j.fetches[group], Fetch{TP: TP{topic, part}, Offset: off, Requested: requested, At: now})
		}
		if q.Version >= 8 {
			for gi, g := range p.Groups {
				if g.ErrorCode != 0 || gi >= len(q.Groups) {
					continue
				}
				for _, t := range g.Topics {
					for _, pp := range t.Partitions {
						if pp.ErrorCode == 0 {
							add(g.Group, t.Topic, pp.Partition, pp.Offset)
						}
					}
				}
			}
			return
		}
		if p.ErrorCode != 0 {
			return
		}
		for _, t := range p.Topics {
			for _, pp := range t.Partitions {
				if pp.ErrorCode == 0 {
					add(q.Group, t.Topic, pp.Partition, pp.Offset)
				}
			}
		}
	case *kmsg.OffsetCommitRequest:
		p, ok := resp.(*kmsg.OffsetCommitResponse)
		if !ok {
			return
		}
		for ti, t := range q.Topics {
			if ti >= len(p.Topics) {
				break
			}
			for pi, pp := range t.Partitions {
				if pi >= len(p.Topics[ti].Partitions) {
					continue
				}
				if code := p.Topics[ti].Partitions[pi].ErrorCode; code != 0 {
					j.failed[q.Group] = append(j.failed[q.Group], fmt.Sprintf("%s/%d@%d gen %d %s: error %d", t.Topic, pp.Partition, pp.Offset, q.Generation, q.MemberID, code))
					continue
				}
				j.commits[q.Group] = append(j.commits[q.Group], Commit{
					TP: TP{t.Topic, pp.Partition}, Offset: pp.Offset, Gen: q.Generation, Member: q.MemberID, At: now, Requested: requested,
				})
			}
		}
	}
}

// sentCommit records an OffsetCommit request before it is forwarded: cohort
// may apply it even if its answer never reaches the router (a connection
// dropped by a test), and a later fetch may then show it.
func (j *Journal) sentCommit(q *kmsg.OffsetCommitRequest, requested time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, t := range q.Topics {
		for _, pp := range t.Partitions {
			j.sent[q.Group] = append(j.sent[q.Group], Commit{
				TP: TP{t.Topic, pp.Partition}, Offset: pp.Offset, Gen: q.Generation, Member: q.MemberID, Requested: requested,
			})
		}
	}
}

// decodeAssignment reads a ConsumerProtocol assignment. Empty bytes are an
// empty assignment.
func decodeAssignment(b []byte) ([]TP, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	var out []TP
	for _, t := range a.Topics {
		for _, p := range t.Partitions {
			out = append(out, TP{t.Topic, p})
		}
	}
	sortTPs(out)
	return out, nil
}

func sortTPs(tps []TP) {
	sort.Slice(tps, func(i, k int) bool {
		if tps[i].Topic != tps[k].Topic {
			return tps[i].Topic < tps[k].Topic
		}
		return tps[i].Partition < tps[k].Partition
	})
}

// Joins returns the group's successful joins in the order they were answered.
func (j *Journal) Joins(group string) []Join {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Join(nil), j.joins[group]...)
}

// Commits returns the group's acknowledged commits in answer order.
func (j *Journal) Commits(group string) []Commit {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Commit(nil), j.commits[group]...)
}

// FailedCommits describes the group's refused commit partitions.
func (j *Journal) FailedCommits(group string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.failed[group]...)
}

// Generations returns the generations in which some member received an
// assignment, ascending.
func (j *Journal) Generations(group string) []int32 {
	j.mu.Lock()
	defer j.mu.Unlock()
	var gens []int32
	for g := range j.assign[group] {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(a, b int) bool { return gens[a] < gens[b] })
	return gens
}

// Assignment returns what each member received in generation gen.
func (j *Journal) Assignment(group string, gen int32) map[string][]TP {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string][]TP{}
	for m, tps := range j.assign[group][gen] {
		out[m] = append([]TP(nil), tps...)
	}
	return out
}

// SyncedAt returns when member received its assignment of generation gen.
func (j *Journal) SyncedAt(group string, gen int32, member string) time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.syncAt[group][gen][member]
}

// LastGeneration returns the highest generation with an assignment, or -1.
func (j *Journal) LastGeneration(group string) int32 {
	gens := j.Generations(group)
	if len(gens) == 0 {
		return -1
	}
	return gens[len(gens)-1]
}

// CheckNoOverlap returns an error if a partition was assigned to two members
// in the same generation, or an assignment could not be decoded.
func (j *Journal) CheckNoOverlap(group string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.decode) > 0 {
		return fmt.Errorf("undecodable responses: %s", strings.Join(j.decode, "; "))
	}
	instance := map[string]string{} // member id → group.instance.id
	for _, jn := range j.joins[group] {
		if jn.Instance != "" {
			instance[jn.Member] = jn.Instance
		}
	}
	for gen, members := range j.assign[group] {
		// A static member replaced within the generation (same instance
		// id, new member id) is fenced from then on: only the latest
		// holder of an instance id counts.
		latest := map[string]string{}
		for m := range members {
			if in := instance[m]; in != "" {
				if p, ok := latest[in]; !ok || j.syncAt[group][gen][m].After(j.syncAt[group][gen][p]) {
					latest[in] = m
				}
			}
		}
		owner := map[TP]string{}
		for m, tps := range members {
			if in := instance[m]; in != "" && latest[in] != m {
				continue
			}
			for _, tp := range tps {
				if o, ok := owner[tp]; ok {
					return fmt.Errorf("group %s generation %d: %s assigned to both %s and %s", group, gen, tp, o, m)
				}
				owner[tp] = m
			}
		}
	}
	return nil
}

// Members returns the members that joined generation gen (successful
// JoinGroup answers of that generation).
func (j *Journal) Members(group string, gen int32) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.members(group, gen)
}

func (j *Journal) members(group string, gen int32) []string {
	var out []string
	for _, jn := range j.joins[group] {
		if jn.Gen == gen && !slices.Contains(out, jn.Member) {
			out = append(out, jn.Member)
		}
	}
	sort.Strings(out)
	return out
}

// MemberOf returns the member id of the latest join of the client with
// this client id, or "".
func (j *Journal) MemberOf(group, clientID string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := ""
	for _, jn := range j.joins[group] {
		if jn.ClientID == clientID {
			m = jn.Member
		}
	}
	return m
}

// Settled reports whether generation gen is settled: every member that
// joined it received its assignment.
func (j *Journal) Settled(group string, gen int32) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.settled(group, gen)
}

func (j *Journal) settled(group string, gen int32) bool {
	ms := j.members(group, gen)
	if len(ms) == 0 {
		return false
	}
	for _, m := range ms {
		if _, ok := j.assign[group][gen][m]; !ok {
			return false
		}
	}
	return true
}

// Covers reports whether the assignments of generation gen give out every
// partition of want.
func (j *Journal) Covers(group string, gen int32, want []TP) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.uncovered(group, gen, want) == nil
}

func (j *Journal) uncovered(group string, gen int32, want []TP) []TP {
	given := map[TP]bool{}
	for _, tps := range j.assign[group][gen] {
		for _, tp := range tps {
			given[tp] = true
		}
	}
	var out []TP
	for _, tp := range want {
		if !given[tp] {
			out = append(out, tp)
		}
	}
	return out
}

// CheckCoverage returns an error if a settled generation (see Settled) of
// an eager protocol left a partition of want unassigned. Under a
// cooperative protocol a generation leaves out, on purpose, the partitions
// being moved (they are given out in the next one, KIP-429), so only eager
// generations are checked.
func (j *Journal) CheckCoverage(group string, want []TP) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for gen := range j.assign[group] {
		if !j.settled(group, gen) || j.cooperative(group, gen) {
			continue
		}
		if miss := j.uncovered(group, gen, want); miss != nil {
			return fmt.Errorf("group %s generation %d (members %v, all synced): %v assigned to no one", group, gen, j.members(group, gen), miss)
		}
	}
	return nil
}

// owns reports whether member was given tp in generation gen. Commits
// outside a generation (gen < 0, admin commits) count as owned. Under the
// cooperative protocol a member learns in generation N which of its
// partitions it must give up and commits them with N before rejoining
// (KIP-429), so there what it held in its previous generation counts too.
func (j *Journal) owns(group string, gen int32, member string, tp TP) bool {
	if gen < 0 {
		return true
	}
	has := func(g int32) bool {
		for _, x := range j.assign[group][g][member] {
			if x == tp {
				return true
			}
		}
		return false
	}
	if has(gen) {
		return true
	}
	if !j.cooperative(group, gen) {
		return false
	}
	prev := int32(-1)
	for g, ms := range j.assign[group] {
		if _, ok := ms[member]; ok && g < gen && g > prev {
			prev = g
		}
	}
	return prev >= 0 && has(prev)
}

// cooperative reports whether generation gen of group chose a cooperative
// protocol.
func (j *Journal) cooperative(group string, gen int32) bool {
	for _, jn := range j.joins[group] {
		if jn.Gen == gen {
			return strings.Contains(jn.Protocol, "cooperative")
		}
	}
	return false
}

// StrayCommits returns the acknowledged commits of partitions that the
// committing member was not given in the generation it committed with.
// Kafka's classic coordinator (and cohort) accepts them: it checks the
// generation and member, not partition ownership.
func (j *Journal) StrayCommits(group string) []Commit {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Commit
	for _, c := range j.commits[group] {
		if !j.owns(group, c.Gen, c.Member, c.TP) {
			out = append(out, c)
		}
	}
	return out
}

// BackwardsCommits describes every acknowledged commit of a partition that
// was lower than the one acknowledged before it. That is the client's doing,
// not cohort's (Kafka accepts any offset): kafka-go's Reader flushes, with the
// new generation's id, offsets of records it fetched before a rebalance;
// librdkafka re-sent an older commit after cohort was killed and restarted;
// franz-go once committed, in a cooperative rebalance, an offset below the
// previous owner's. What is cohort's part, that OffsetFetch answers reflect
// the acknowledged commits, is checked by CheckFetchesSeeCommits. With
// staleOK, stray commits (see StrayCommits) are left out.
func (j *Journal) BackwardsCommits(group string, staleOK bool) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var notes []string
	last := map[TP]Commit{}
	for _, c := range j.commits[group] {
		if staleOK && !j.owns(group, c.Gen, c.Member, c.TP) {
			continue
		}
		if p, ok := last[c.TP]; ok && c.Offset < p.Offset {
			notes = append(notes, fmt.Sprintf("group %s %s: commit went backwards from %d (gen %d, %s) to %d (gen %d, %s)",
				group, c.TP, p.Offset, p.Gen, p.Member, c.Offset, c.Gen, c.Member))
		}
		last[c.TP] = c
	}
	return notes
}

// CheckFetchesSeeCommits returns an error unless every committed offset that
// OffsetFetch answered reflects the commits cohort had acknowledged before
// the fetch was sent. With last the latest commit of the partition
// acknowledged before the fetch was sent, the answer must be last's offset
// or that of a commit request that cohort may have applied after last: one
// sent before the answer came back and not itself acknowledged before last
// was sent (commits on different connections that overlap in time may be
// applied in either order, and a commit whose answer a test's dropped
// connection lost may still have been applied).
func (j *Journal) CheckFetchesSeeCommits(group string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	type key struct {
		tp        TP
		off       int64
		gen       int32
		member    string
		requested time.Time
	}
	ackedAt := map[key]time.Time{}
	acked := map[TP][]Commit{}
	for _, c := range j.commits[group] {
		acked[c.TP] = append(acked[c.TP], c)
		ackedAt[key{c.TP, c.Offset, c.Gen, c.Member, c.Requested}] = c.At
	}
	sent := map[TP][]Commit{}
	for _, c := range j.sent[group] {
		sent[c.TP] = append(sent[c.TP], c)
	}
	for _, f := range j.fetches[group] {
		var last *Commit
		for i, c := range acked[f.TP] {
			if c.At.Before(f.Requested) {
				last = &acked[f.TP][i]
			}
		}
		if last == nil || f.Offset == last.Offset {
			continue
		}
		ok := false
		for _, c := range sent[f.TP] {
			if c.Offset != f.Offset || !c.Requested.Before(f.At) {
				continue
			}
			if at, answered := ackedAt[key{c.TP, c.Offset, c.Gen, c.Member, c.Requested}]; answered && at.Before(last.Requested) {
				continue // acknowledged before last was even sent: superseded
			}
			ok = true
			break
		}
		if !ok {
			return fmt.Errorf("group %s %s: OffsetFetch sent at %s answered %d, but %d (gen %d, %s) was acknowledged at %s",
				group, f.TP, f.Requested.Format("15:04:05.000"), f.Offset, last.Offset, last.Gen, last.Member, last.At.Format("15:04:05.000"))
		}
	}
	return nil
}

// CheckCommitFencing returns an error if cohort acknowledged a commit of
// generation g whose request reached the router after a JoinGroup of a
// later generation had been answered: the group had moved on by then, so
// the commit had to be refused (ILLEGAL_GENERATION). Simple commits
// (generation -1) are not fenced.
func (j *Journal) CheckCommitFencing(group string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	firstJoin := map[int32]time.Time{} // generation → its first join answer
	for _, jn := range j.joins[group] {
		if at, ok := firstJoin[jn.Gen]; !ok || jn.At.Before(at) {
			firstJoin[jn.Gen] = jn.At
		}
	}
	for _, c := range j.commits[group] {
		if c.Gen < 0 {
			continue
		}
		for g, at := range firstJoin {
			if g > c.Gen && at.Before(c.Requested) {
				return fmt.Errorf("group %s: commit %s@%d of generation %d (%s) sent at %s was acknowledged, but generation %d had begun at %s",
					group, c.TP, c.Offset, c.Gen, c.Member, c.Requested.Format("15:04:05.000000"), g, at.Format("15:04:05.000000"))
			}
		}
	}
	return nil
}

// Fetches returns the group's fetched offsets in answer order.
func (j *Journal) Fetches(group string) []Fetch {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Fetch(nil), j.fetches[group]...)
}

// LastCommits returns each partition's latest acknowledged offset.
func (j *Journal) LastCommits(group string) map[TP]int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[TP]int64{}
	for _, c := range j.commits[group] {
		out[c.TP] = c.Offset
	}
	return out
}

// Dump logs the journal of a group: generations and assignments, commits,
// fetched offsets.
func (j *Journal) Dump(t testing.TB, grp string) {
	for _, jn := range j.Joins(grp) {
		t.Logf("join  %s gen %d member %s instance %q protocol %s leader=%v v%d", jn.At.Format("15:04:05.000"), jn.Gen, jn.Member, jn.Instance, jn.Protocol, jn.Rebalanced, jn.Version)
	}
	for _, g := range j.Generations(grp) {
		for m, tps := range j.Assignment(grp, g) {
			t.Logf("sync  %s gen %d member %s: %v", j.SyncedAt(grp, g, m).Format("15:04:05.000"), g, m, tps)
		}
	}
	for _, c := range j.Commits(grp) {
		t.Logf("commit %s %s@%d gen %d %s", c.At.Format("15:04:05.000"), c.TP, c.Offset, c.Gen, c.Member)
	}
	for _, f := range j.Fetches(grp) {
		t.Logf("fetch %s (sent %s) %s@%d", f.At.Format("15:04:05.000"), f.Requested.Format("15:04:05.000"), f.TP, f.Offset)
	}
}

// WaitFor polls cond until it holds or ctx ends.
func WaitFor(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
