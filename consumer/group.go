package consumer

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/consumer/assign"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/member"
)

// ProtocolType is the protocol type of consumer groups.
const ProtocolType = "consumer"

// GroupConfig configures a Group.
type GroupConfig struct {
	// Member holds the connection and timing settings (Brokers,
	// ClientOpts such as TLS and SASL, Group, InstanceID, timeouts, Clock,
	// Logger). Member.Client is ignored: the group needs a *kgo.Client,
	// given in Client or created from Brokers with ClientOpts.
	Member member.Config
	// Client, if set, is used as it is. The client the group creates
	// otherwise commits and fetches offsets at OffsetCommit and
	// OffsetFetch v9, which name topics, so that offsets of topics
	// outside cohort's catalog (which have no topic ID) can be committed
	// and are fetched; v10 names topics by ID, and a Client left at
	// franz-go's defaults negotiates it, so it commits and fetches only
	// topics whose IDs the server's Metadata gives.
	Client *kgo.Client
	// Topics the member subscribes to. A topic the server does not know,
	// or that the leader's principal may not DESCRIBE, is not assigned;
	// the leader logs the latter at Warn.
	Topics []string
	// Assignors in order of preference (default: range). The coordinator
	// picks the first one every member supports. The member follows the
	// cooperative protocol (KIP-429) only when every assignor is
	// cooperative; a list that mixes eager and cooperative assignors runs
	// the eager protocol (revoke everything at each rebalance), as Kafka's
	// consumer picks the highest protocol all its assignors support. That is
	// the first step of the KIP-429 upgrade: roll out [cooperative-sticky,
	// range] (eager), then [cooperative-sticky] alone. A cooperative
	// assignor chosen under the eager protocol sees no owned partitions
	// (they were revoked before the join), so its plan is valid but not
	// sticky. When this member leads with a cooperative assignor, it takes
	// out of the plan (and logs) every partition handed to one member while
	// another that reports owning it must give it up in the same round: it
	// goes out in the follow-up rebalance, once its owner has revoked it
	// (KIP-429; Kafka's consumer checks the same and fails the assignment).
	Assignors []assign.Assignor
	// Rack is this member's rack, announced in its subscription (version
	// 3, KIP-881) for rack-aware assignors. When this member leads, the
	// assignor also gets each partition's replica racks (assign.Topic.Racks)
	// from the Metadata response: the racks of the brokers holding its
	// replicas.
	Rack string

	// Assigned reports partitions newly assigned to this member. ctx is
	// cancelled when the membership ends (lost, Close) and, with an eager
	// assignor, at the next rebalance; with a cooperative assignor partial
	// revocations are reported by Revoked only.
	Assigned func(ctx context.Context, g member.Generation, added []assign.TopicPartitions)
	// Revoked reports partitions taken away in an orderly way, before the
	// group commits the offsets marked for them and moves them on. With an
	// eager assignor this is every partition at every rebalance; with a
	// cooperative one only those that move (KIP-429).
	Revoked func(revoked []assign.TopicPartitions)
	// Lost reports partitions that may already belong to another member;
	// nothing is committed for them.
	Lost func(lost []assign.TopicPartitions)
}

// Group is a member of a consumer group: the consumer protocol on top of
// package member, with any assignor of package assign. It does not fetch
// records; it decides which partitions this process owns, keeps the committed
// offsets, and commits on revocation. Services that own partitions of a
// resource use it, and so do tests of the assignors against real
// coordinators.
type Group struct {
	cfg GroupConfig
	cl  *kgo.Client
	own bool
	m   *member.Member
	// ready is closed once StartGroup has set m: the member's callbacks
	// may run before (see member).
	ready chan struct{}
	log   *slog.Logger
	coop  bool

	mu       sync.Mutex
	owned    map[string]map[int32]bool
	ownedGen int32
	// last is the last assignment, kept across an eager revocation for
	// assignors whose user data remembers it (sticky).
	last  []assign.TopicPartitions
	marks map[tp]int64 // offsets marked for commit
	// failed holds the partitions whose marks were put back after their
	// commit on revoke failed, with the generation of that commit: such a
	// mark is still this member's progress if the partition comes back in
	// the very next generation (nobody else can have owned it), and stale
	// otherwise.
	failed   map[tp]int32
	closing  bool  // Close was called
	closeErr error // commits on revoke that failed since Close was called
}

// CommitError reports that the commit of the offsets marked for revoked
// partitions failed (Close returns it; failures during rebalances are
// logged). The offsets stay marked: if this member is assigned a partition
// again in the very next generation, nobody else can have owned it and its
// mark is committed at its next revocation; otherwise (another member may
// have committed since) or when the membership is lost, the mark is
// dropped. After Close nothing commits them; a caller that must not lose
// the progress can keep them, or commit them once the group is empty.
type CommitError struct {
	Generation int32                      // the generation the commit was made in
	Offsets    map[string]map[int32]int64 // topic -> partition -> offset of the failed commit
	Err        error
}

func (e *CommitError) Error() string {
	n := 0
	for _, ps := range e.Offsets {
		n += len(ps)
	}
	return fmt.Sprintf("consumer: commit of %d marked offsets on revoke in generation %d failed: %v", n, e.Generation, e.Err)
}

func (e *CommitError) Unwrap() error { return e.Err }

type tp struct {
	topic     string
	partition int32
}

// StartGroup joins the consumer group.
func StartGroup(cfg GroupConfig) (*Group, error) {
	if len(cfg.Topics) == 0 {
		return nil, errors.New("consumer: no topics")
	}
	if len(cfg.Assignors) == 0 {
		cfg.Assignors = []assign.Assignor{assign.Range()}
	}
	g := &Group{cfg: cfg, owned: map[string]map[int32]bool{}, ownedGen: -1, marks: map[tp]int64{}, failed: map[tp]int32{}, ready: make(chan struct{})}
	// Cooperative only if every assignor is (KIP-429: the highest protocol
	// all of them support), so a mixed list runs eager.
	g.coop = true
	for _, a := range cfg.Assignors {
		g.coop = g.coop && a.Cooperative()
	}
	g.cl = cfg.Client
	if g.cl == nil {
		cl, err := member.NewClient(cfg.Member.Brokers, append([]kgo.Opt{byname.Opt()}, cfg.Member.ClientOpts...)...)
		if err != nil {
			return nil, err
		}
		g.cl, g.own = cl, true
	}
	mc := cfg.Member
	g.log = mc.Logger
	if g.log == nil {
		g.log = slog.Default()
	}
	mc.Client = g.cl
	mc.ProtocolType = ProtocolType
	mc.Protocols = g.protocols
	mc.Assign = g.assign
	mc.Cooperative = g.coop
	// A cooperative member closed while it waits for the leader's
	// assignment commits in the new generation rather than being refused
	// (REBALANCE_IN_PROGRESS) in the old one.
	mc.FinishRebalanceOnClose = true
	mc.Assigned = g.assigned
	mc.Revoked = func(gen member.Generation) {
		if err := g.revoke(nil, true, gen); err != nil {
			g.mu.Lock()
			if g.closing {
				g.closeErr = errors.Join(g.closeErr, err)
			}
			g.mu.Unlock()
		}
	}
	mc.Lost = func(member.Generation, error) { g.lose() }
	m, err := member.Start(mc)
	if err != nil {
		if g.own {
			g.cl.Close()
		}
		return nil, err
	}
	g.m = m
	close(g.ready)
	return g, nil
}

// member returns the member once StartGroup has set it; the callbacks, which
// the member's goroutine may run before, use it.
func (g *Group) member() *member.Member {
	<-g.ready
	return g.m
}

// Assignment returns the partitions this member owns, sorted.
func (g *Group) Assignment() []assign.TopicPartitions {
	g.mu.Lock()
	defer g.mu.Unlock()
	return toList(g.owned)
}

// Generation returns the current generation and whether it is stable.
func (g *Group) Generation() (member.Generation, bool) { return g.m.Generation() }

// Mark records offset as the next offset to consume for a partition; marked
// offsets of a partition are committed when it is revoked and on Close. A
// failed commit is logged, its offsets stay marked (see CommitError), and
// Close returns the failure of its own commit.
func (g *Group) Mark(topic string, partition int32, offset int64) {
	g.mu.Lock()
	g.marks[tp{topic, partition}] = offset
	delete(g.failed, tp{topic, partition})
	g.mu.Unlock()
}

// ErrNoGeneration is Commit's error before the member has joined a
// generation, or after it lost its membership and until it joins again:
// there is no generation to commit in, so nothing was sent.
var ErrNoGeneration = errors.New("consumer: no generation to commit in")

// Commit commits offsets with this member's id and generation, so the
// coordinator refuses it (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS,
// UNKNOWN_MEMBER_ID) once the generation has moved on. The coordinator checks
// the member and its generation, not which partitions it was assigned:
// commit only the partitions of Assignment.
func (g *Group) Commit(ctx context.Context, offsets map[string]map[int32]int64) error {
	gen, _ := g.m.Generation()
	if gen.ID < 0 {
		return ErrNoGeneration
	}
	return g.commit(ctx, gen, offsets)
}

func (g *Group) commit(ctx context.Context, gen member.Generation, offsets map[string]map[int32]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = g.cfg.Member.Group
	req.Generation = gen.ID
	req.MemberID = gen.MemberID
	if gen.InstanceID != "" {
		inst := gen.InstanceID
		req.InstanceID = &inst
	}
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	// OffsetCommit v10+ names topics by id; kgo negotiates the version, so
	// send both (each version encodes the field it has).
	ids, err := g.topicIDs(ctx, topics)
	if err != nil {
		return err
	}
	names := map[[16]byte]string{}
	for _, t := range topics {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = t, ids[t]
		names[ids[t]] = t
		for p, o := range offsets[t] {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, g.cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		name := t.Topic
		if name == "" {
			name = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("consumer: commit %s/%d: %w", name, p.Partition, err)
			}
		}
	}
	return nil
}

// Fetch returns the group's committed offsets (topic -> partition -> offset).
func (g *Group) Fetch(ctx context.Context) (map[string]map[int32]int64, error) {
	resps, err := kadm.NewClient(g.cl).FetchOffsets(ctx, g.cfg.Member.Group)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	var first error
	resps.Each(func(r kadm.OffsetResponse) {
		if r.Err != nil {
			first = errors.Join(first, r.Err)
			return
		}
		if out[r.Topic] == nil {
			out[r.Topic] = map[int32]int64{}
		}
		out[r.Topic][r.Partition] = r.At
	})
	return out, first
}

// Close revokes the owned partitions, commits what is marked for them, and
// leaves the group (see member.Member.Close). When that commit fails, Close
// returns a *CommitError (joined with any other error) naming the offsets
// not committed.
//
// When Close comes while a cooperative member is rebalancing (its JoinGroup
// or SyncGroup under way, or its assignor running), it first lets the
// rebalance complete, for at most half the time ctx leaves it: the
// coordinator accepts no commits while it waits for the leader's
// assignment, and accepts them in the new generation. The partitions this
// member owned are then revoked and their marks committed in the new
// generation (partitions the new assignment adds are not reported), and it
// leaves. If the rebalance does not complete in that time (or fails), the
// member stops waiting and revokes in the generation it has, which the
// coordinator refuses while it waits for the assignment: Close then returns
// the *CommitError. When ctx ends first, Close returns its error, and the
// revocation and the LeaveGroup still happen (a failed commit may then only
// be logged). Kafka's consumer does not wait: during a rebalance its commit
// on close fails and is logged, and it leaves.
func (g *Group) Close(ctx context.Context) error {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	err := g.m.Close(ctx)
	if g.own {
		g.cl.Close()
	}
	g.mu.Lock()
	err = errors.Join(err, g.closeErr)
	g.mu.Unlock()
	return err
}

// Abandon stops as a crash would (no commit, no LeaveGroup).
func (g *Group) Abandon() {
	g.m.Abandon()
	if g.own {
		g.cl.Close()
	}
}

// Rejoin triggers a rebalance (for example after the topics changed).
func (g *Group) Rejoin() { g.m.Rejoin() }

// Done is closed when the group member has stopped (Close, Abandon, or an
// error that stops it for good: Err).
func (g *Group) Done() <-chan struct{} { return g.m.Done() }

// Err is the error that stopped the member for good (a *member.FatalError:
// the coordinator refused its configuration, for one), or nil while it runs
// and after Close or Abandon.
func (g *Group) Err() error { return g.m.Err() }

func (g *Group) protocols() []member.Protocol {
	g.mu.Lock()
	owned, gen := toList(g.owned), g.ownedGen
	prev := owned
	if !g.coop {
		prev = g.last
	}
	g.mu.Unlock()
	out := make([]member.Protocol, 0, len(g.cfg.Assignors))
	for _, a := range g.cfg.Assignors {
		s := Subscription{
			Version:    MaxVersion,
			Topics:     g.cfg.Topics,
			UserData:   a.UserData(prev, gen),
			Owned:      owned,
			Generation: gen,
			Rack:       g.cfg.Rack,
		}
		b, err := s.Encode()
		if err != nil {
			g.log.Error("encoding subscription", "err", err)
			continue
		}
		out = append(out, member.Protocol{Name: a.Name(), Metadata: b})
	}
	return out
}

// assign runs on the leader: decode subscriptions, read topic metadata,
// run the chosen assignor.
func (g *Group) assign(ctx context.Context, gen member.Generation) (map[string][]byte, error) {
	var a assign.Assignor
	for _, x := range g.cfg.Assignors {
		if x.Name() == gen.Protocol {
			a = x
		}
	}
	if a == nil {
		return nil, fmt.Errorf("consumer: chosen protocol %q is not among ours", gen.Protocol)
	}
	members := make([]assign.Member, 0, len(gen.Members))
	topicSet := map[string]bool{}
	version := MaxVersion
	for _, mm := range gen.Members {
		s, err := DecodeSubscription(mm.Metadata)
		if err != nil {
			g.log.Warn("undecodable subscription; member gets nothing", "member", mm.ID, "err", err)
			s = Subscription{Generation: -1}
		}
		version = min(version, s.Version)
		members = append(members, s.Member(mm.ID, mm.InstanceID))
		for _, t := range s.Topics {
			topicSet[t] = true
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	topics, err := g.metadata(ctx, topicSet)
	if err != nil {
		return nil, err
	}
	plan, err := a.Assign(members, topics)
	if err != nil {
		return nil, err
	}
	if a.Cooperative() {
		var withheld []string
		if plan, withheld = withholdMoves(members, plan); len(withheld) > 0 {
			const show = 5
			more := len(withheld) - min(len(withheld), show)
			g.log.Warn("cooperative assignor moves partitions their owners still report; withholding them until revoked (KIP-429)",
				"assignor", a.Name(), "generation", gen.ID, "withheld", withheld[:min(len(withheld), show)], "more", more)
		}
	}
	out := make(map[string][]byte, len(plan))
	for id, as := range plan {
		b, err := FromAssign(version, as).Encode()
		if err != nil {
			return nil, err
		}
		out[id] = b
	}
	return out, nil
}

// withholdMoves makes a cooperative assignor's plan safe: it takes out of
// each member's assignment the partitions that another member, reporting
// them owned in its subscription, is told to give up in the same round, and
// returns them ("topic/partition from owner to member"). KIP-429 requires
// the owner to revoke such a partition first and a follow-up rebalance to
// hand it over; handed over at once, both members would consume it. The
// owner, no longer assigned the partition, revokes it and rejoins, and the
// next plan can give it away. Kafka's ConsumerCoordinator checks the same
// condition (validateCooperativeAssignment: partitions both added to some
// member and revoked from another) and fails the assignment instead; here a
// failed Assign would only be retried with the same subscriptions until the
// coordinator evicted the leader for not syncing. A member left out of the
// plan gets nothing, so it gives up everything it reports. plan itself is
// not modified.
func withholdMoves(members []assign.Member, plan map[string]assign.Assignment) (map[string]assign.Assignment, []string) {
	set := func(l []assign.TopicPartitions) map[tp]bool {
		out := map[tp]bool{}
		for _, t := range l {
			for _, p := range t.Partitions {
				out[tp{t.Topic, p}] = true
			}
		}
		return out
	}
	revokedFrom := map[tp]string{}
	owned := make(map[string]map[tp]bool, len(members))
	for _, m := range members {
		owned[m.ID] = set(m.Owned)
		got := set(plan[m.ID].Partitions)
		for _, t := range m.Owned {
			for _, p := range t.Partitions {
				if k := (tp{t.Topic, p}); !got[k] {
					if _, ok := revokedFrom[k]; !ok {
						revokedFrom[k] = m.ID
					}
				}
			}
		}
	}
	if len(revokedFrom) == 0 {
		return plan, nil
	}
	ids := make([]string, 0, len(plan))
	for id := range plan {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var withheld []string
	out, cloned := plan, false
	for _, id := range ids {
		as := plan[id]
		var keep []assign.TopicPartitions
		changed := false
		for _, t := range as.Partitions {
			kt := assign.TopicPartitions{Topic: t.Topic}
			for _, p := range t.Partitions {
				k := tp{t.Topic, p}
				if from, ok := revokedFrom[k]; ok && !owned[id][k] {
					withheld = append(withheld, fmt.Sprintf("%s/%d from %s to %s", t.Topic, p, from, id))
					changed = true
					continue
				}
				kt.Partitions = append(kt.Partitions, p)
			}
			if len(kt.Partitions) > 0 {
				keep = append(keep, kt)
			}
		}
		if !changed {
			continue
		}
		if !cloned {
			out, cloned = maps.Clone(plan), true
		}
		as.Partitions = keep
		out[id] = as
	}
	return out, withheld
}

// topicIDs looks the topics' ids up (zero when the server has none).
func (g *Group) topicIDs(ctx context.Context, topics []string) (map[string][16]byte, error) {
	resp, err := g.requestMetadata(ctx, slices.Values(topics))
	if err != nil {
		return nil, err
	}
	out := map[string][16]byte{}
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out[*t.Topic] = t.TopicID
		}
	}
	return out, nil
}

func (g *Group) metadata(ctx context.Context, topicSet map[string]bool) (map[string]assign.Topic, error) {
	resp, err := g.requestMetadata(ctx, maps.Keys(topicSet))
	if err != nil {
		return nil, err
	}
	// A topic this principal may not DESCRIBE is left out like a missing
	// one, but it is a configuration error the members cannot see: they
	// are simply assigned none of its partitions. Kafka's consumer raises
	// it from poll (TopicAuthorizationException); the leader says so.
	var refused []string
	for _, t := range resp.Topics {
		if t.ErrorCode == kerr.TopicAuthorizationFailed.Code && t.Topic != nil {
			refused = append(refused, *t.Topic)
		}
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		g.log.Warn("subscribed topics not assigned: not authorized to DESCRIBE them (TOPIC_AUTHORIZATION_FAILED)",
			"topics", refused, "group", g.cfg.Member.Group)
	}
	return topicsFromMetadata(resp), nil
}

// requestMetadata asks for the metadata of the topics.
func (g *Group) requestMetadata(ctx context.Context, topics iter.Seq[string]) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, g.cl)
	if err != nil {
		return nil, fmt.Errorf("consumer: metadata: %w", err)
	}
	return resp, nil
}

// topicsFromMetadata is the assignors' view of a Metadata response: each
// topic's partition count and, per partition, the racks of its replicas
// (Topic.Racks, from the brokers' racks and the partition's replica node
// ids, in replica order, without repeats), which rack-aware assignors
// match against the members' racks. A topic with an error is left out (it
// is not assigned). Racks is nil for a topic none of whose replicas is on a
// broker with a known rack; a partition whose replicas have no known rack
// gets an empty entry.
func topicsFromMetadata(resp *kmsg.MetadataResponse) map[string]assign.Topic {
	rackOf := map[int32]string{}
	for _, b := range resp.Brokers {
		if b.Rack != nil && *b.Rack != "" {
			rackOf[b.NodeID] = *b.Rack
		}
	}
	out := map[string]assign.Topic{}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue // a missing topic is simply not assigned
		}
		n := int32(len(t.Partitions))
		topic := assign.Topic{Name: *t.Topic, Partitions: n}
		if len(rackOf) > 0 {
			racks := make([][]string, n)
			known := false
			for _, p := range t.Partitions {
				if p.Partition < 0 || p.Partition >= n {
					continue // not a partition id of this topic
				}
				for _, id := range p.Replicas {
					if r, ok := rackOf[id]; ok && !slices.Contains(racks[p.Partition], r) {
						racks[p.Partition] = append(racks[p.Partition], r)
						known = true
					}
				}
			}
			if known {
				topic.Racks = racks
			}
		}
		out[*t.Topic] = topic
	}
	return out
}

func (g *Group) assigned(ctx context.Context, gen member.Generation) {
	a, err := DecodeAssignment(gen.Assignment)
	if err != nil {
		g.log.Error("undecodable assignment; rejoining", "err", err)
		g.member().Rejoin()
		return
	}
	next := map[string]map[int32]bool{}
	for _, t := range a.Partitions {
		for _, p := range t.Partitions {
			if next[t.Topic] == nil {
				next[t.Topic] = map[int32]bool{}
			}
			next[t.Topic][p] = true
		}
	}
	var revoked []assign.TopicPartitions
	if g.coop {
		g.mu.Lock()
		for t, ps := range g.owned {
			for p := range ps {
				if !next[t][p] {
					revoked = addTP(revoked, t, p)
				}
			}
		}
		g.mu.Unlock()
		if len(revoked) > 0 {
			_ = g.revoke(revoked, false, gen) // a failure is logged; the marks stay
		}
	}
	g.mu.Lock()
	var added []assign.TopicPartitions
	for t, ps := range next {
		for p := range ps {
			if !g.owned[t][p] {
				added = addTP(added, t, p)
				k := tp{t, p}
				if fg, ok := g.failed[k]; ok {
					// A mark put back after a failed commit is still ours
					// only if nobody can have owned the partition since.
					delete(g.failed, k)
					if gen.ID != fg+1 {
						delete(g.marks, k)
					}
				}
				if g.owned[t] == nil {
					g.owned[t] = map[int32]bool{}
				}
				g.owned[t][p] = true
			}
		}
	}
	g.ownedGen = gen.ID
	g.last = toList(g.owned)
	g.mu.Unlock()
	sortTPs(added)
	if len(added) > 0 && g.cfg.Assigned != nil {
		g.cfg.Assigned(ctx, gen, added)
	}
	if len(revoked) > 0 {
		g.member().Rejoin() // KIP-429: the revoked partitions go out next round
	}
}

// revoke stops partitions in an orderly way: user callback, then commit of
// their marked offsets in gen, the member's generation (while rebalancing,
// still the one that owned them until the member's join completes; the
// coordinator accepts commits in it until then). nil with all=true revokes
// everything. A failed commit puts the marks back (unless marked again
// meanwhile) and is returned as a *CommitError.
func (g *Group) revoke(parts []assign.TopicPartitions, all bool, gen member.Generation) error {
	g.mu.Lock()
	if all {
		parts = toList(g.owned)
	}
	g.mu.Unlock()
	if len(parts) == 0 {
		return nil
	}
	if g.cfg.Revoked != nil {
		g.cfg.Revoked(parts)
	}
	offsets := map[string]map[int32]int64{}
	g.mu.Lock()
	for _, t := range parts {
		for _, p := range t.Partitions {
			if o, ok := g.marks[tp{t.Topic, p}]; ok {
				if offsets[t.Topic] == nil {
					offsets[t.Topic] = map[int32]int64{}
				}
				offsets[t.Topic][p] = o
				delete(g.marks, tp{t.Topic, p})
			}
			delete(g.owned[t.Topic], p)
		}
		if len(g.owned[t.Topic]) == 0 {
			// Nothing kept for a topic no longer owned: a member of a
			// group over short-lived topics would keep one per topic.
			delete(g.owned, t.Topic)
		}
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), max(g.cfg.Member.SessionTimeout, 5*time.Second))
	defer cancel()
	err := g.commit(ctx, gen, offsets)
	g.mu.Lock()
	defer g.mu.Unlock()
	for t, ps := range offsets {
		for p, o := range ps {
			k := tp{t, p}
			if err == nil {
				delete(g.failed, k)
				continue
			}
			if _, again := g.marks[k]; !again {
				g.marks[k] = o
				g.failed[k] = gen.ID
			}
		}
	}
	if err != nil {
		err = &CommitError{Generation: gen.ID, Offsets: offsets, Err: err}
		g.log.Warn("commit on revoke failed; the offsets stay marked", "err", err, "offsets", offsets)
	}
	return err
}

func (g *Group) lose() {
	g.mu.Lock()
	parts := toList(g.owned)
	g.owned = map[string]map[int32]bool{}
	g.ownedGen = -1
	g.last = nil
	g.marks = map[tp]int64{}
	g.failed = map[tp]int32{}
	g.mu.Unlock()
	if len(parts) > 0 && g.cfg.Lost != nil {
		g.cfg.Lost(parts)
	}
}

func addTP(l []assign.TopicPartitions, t string, p int32) []assign.TopicPartitions {
	for i := range l {
		if l[i].Topic == t {
			l[i].Partitions = append(l[i].Partitions, p)
			return l
		}
	}
	return append(l, assign.TopicPartitions{Topic: t, Partitions: []int32{p}})
}

func sortTPs(l []assign.TopicPartitions) {
	sort.Slice(l, func(i, j int) bool { return l[i].Topic < l[j].Topic })
	for _, t := range l {
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i] < t.Partitions[j] })
	}
}

func toList(m map[string]map[int32]bool) []assign.TopicPartitions {
	var out []assign.TopicPartitions
	for t, ps := range m {
		for p := range ps {
			out = addTP(out, t, p)
		}
	}
	sortTPs(out)
	return out
}
