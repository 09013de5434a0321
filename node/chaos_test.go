package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/testlog"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/memstore"
)

// TestChaosOwnership: franz-go consumers of one group, on the classic
// protocol (cooperative-sticky) and on the consumer protocol (KIP-848),
// against a node while a seeded chaos loop cuts their connections, crashes
// them (every connection closed, no dial succeeds: silent until the
// coordinator expires them), starts new ones, makes revocations slow, and
// has the members commit offsets. The members' callbacks go to one
// timeline, in the order they ran; from it, at every step:
//
//   - a partition is given to a member only after its previous owner
//     printed it revoked or lost, or crashed or stopped. When the owner
//     was live, the coordinator must have been able to fence it (no
//     answered heartbeat for about a session timeout, or a revocation
//     held past the rebalance timeout), and the owner must then print the
//     partition lost (or end the revoke callback it was in). When a crashed owner's partition
//     moves is not checked here: a classic member is fenced a rebalance
//     timeout after a rebalance began, which the client does not see; the
//     group package's simulations check the timers on a simulated clock;
//   - a commit the coordinator accepts carries a larger offset than every
//     accepted commit of that partition before it (each member commits
//     values from one increasing counter, for partitions it owns);
//
// and after the chaos, every live member keeps running: the partitions
// are spread over them, each owned once, as the coordinator describes.
//
// A zombie's commit is refused, and not written. Those commits are too
// rare in the chaos's timing to be left to it, so one member is made a
// zombie: cut off while the group is stable, until the coordinator has
// fenced it (its session expired); then, while it still believes it owns
// its partitions, a raw OffsetCommit carries its last member id and
// generation or epoch. After the chaos, the identities the other members
// had then (older now: the fence moved the group on) and the zombie's are
// replayed the same way. Each must get Kafka's answer for that group,
// member protocol and version (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or
// STALE_MEMBER_EPOCH), and no committed offset may become a zombie's. The
// group package's tests check each rule; this checks that the coordinator
// applies them to real clients' identities as the group moves on.
//
// In the mixed run members alternate between the protocols and the first
// one (consumer protocol) stays, so the group is a consumer group with
// classic members throughout: a classic group upgraded in the middle of a
// cooperative rebalance frees at once what a member is still revoking (the
// conversion takes each member's last SyncGroup assignment, in Kafka as in
// cohort), which this check would count against the coordinator.
//
// COHORT_TEST_CHAOS_SECONDS and COHORT_TEST_CHAOS_SEED make longer runs and replay
// the chaos's choices (not their timing).
func TestChaosOwnership(t *testing.T) {
	testwait.WallClock(t, "franz-go consumers under connection chaos")
	dur := 2 * time.Second
	if s, err := strconv.Atoi(os.Getenv("COHORT_TEST_CHAOS_SECONDS")); err == nil && s > 0 {
		dur = time.Duration(s) * time.Second
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("COHORT_TEST_CHAOS_SEED"), 10, 64); err == nil {
		seed = s
	}
	for _, proto := range []string{"classic", "consumer", "mixed"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel() // each has its own node; they mostly wait on timers
			t.Logf("COHORT_TEST_CHAOS_SEED=%d", seed)
			runChaos(t, proto, seed, dur)
		})
	}
}

const (
	chaosTopic     = "work"
	chaosParts     = 8
	chaosSession   = 3 * time.Second
	chaosHeartbeat = 200 * time.Millisecond
	chaosRebalance = 3 * time.Second
)

// chaosEvent is one callback of one member.
type chaosEvent struct {
	at    time.Time
	who   string
	kind  string // assigned, revoked, lost, crashed
	parts []int32
}

// chaosMember is one franz-go client and what the chaos does to it.
type chaosMember struct {
	name    string
	cl      *kgo.Client
	mu      sync.Mutex
	conns   []net.Conn
	crashed bool
	// cutOff: no dial succeeds (a network partition) until restored.
	cutOff bool
	// stop ends the member's commit loop (crash or leave); loopDone is
	// closed when it has ended.
	stop     chan struct{}
	stopOnce sync.Once
	loopDone chan struct{}
	// consumerProto: the member uses the consumer protocol (KIP-848).
	consumerProto bool
	// lastHB is when an answer to the member's heartbeat (Heartbeat,
	// JoinGroup, SyncGroup, ConsumerGroupHeartbeat) last arrived.
	lastHB atomic.Int64
	// slowRevoke: the revoke callback takes this long (chaos).
	slowRevoke atomic.Int64
	// revokingSince: a revoke callback is running since then (0: none).
	revokingSince atomic.Int64
}

func (m *chaosMember) dial(ctx context.Context, network, host string) (net.Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed || m.cutOff {
		return nil, errors.New("unreachable")
	}
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	m.conns = append(m.conns, c)
	return c, nil
}

// cut closes every connection of the member; crash also refuses new ones.
func (m *chaosMember) cut(crash bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if crash {
		m.crashed = true
	}
	for _, c := range m.conns {
		c.Close()
	}
	m.conns = nil
}

func (m *chaosMember) halt() { m.stopOnce.Do(func() { close(m.stop) }) }

// partition makes the member unreachable for d, then lets it dial again.
func (m *chaosMember) partition(d time.Duration) {
	m.mu.Lock()
	m.cutOff = true
	m.mu.Unlock()
	m.cut(false)
	time.AfterFunc(d, func() {
		m.mu.Lock()
		m.cutOff = false
		m.mu.Unlock()
	})
}

func (m *chaosMember) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch key {
	case 12, 11, 14, 68: // Heartbeat, JoinGroup, SyncGroup, ConsumerGroupHeartbeat
		if err == nil {
			m.lastHB.Store(time.Now().UnixNano())
		}
	}
}

// chaosTimeline checks ownership as the callbacks arrive.
type chaosTimeline struct {
	mu      sync.Mutex
	events  []chaosEvent
	owner   map[int32]string
	members map[string]*chaosMember
	crashAt map[string]time.Time
	// overlaps: partition → members that still believe they own it although
	// it was given to another (fenced), each with whether a revoke callback
	// of theirs was running then; resolved by their lost callback (or the
	// end of that revoke callback).
	overlaps map[int32]map[string]bool
	// believes: member → the partitions it believes it owns, by its own
	// callbacks only (assigned adds, revoked and lost remove). A fenced
	// member that rejoins without a lost callback (kgo, evicted in a slow
	// revoke, rejoins with a new id still holding what it had) keeps them,
	// and its later assigned callback names only what it gained; owner,
	// which moves a partition to its newest assignee, would then lose them.
	believes map[string]map[int32]bool
	errs     []string
	excused  int
}

func (tl *chaosTimeline) add(who, kind string, parts []int32) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	now := time.Now()
	if _, dead := tl.crashAt[who]; dead && kind != "crashed" && kind != "left" {
		return // a crashed member's later callbacks are not a live owner's
	}
	tl.events = append(tl.events, chaosEvent{at: now, who: who, kind: kind, parts: parts})
	switch kind {
	case "crashed", "left":
		tl.crashAt[who] = now
		for _, ws := range tl.overlaps {
			delete(ws, who)
		}
		delete(tl.believes, who)
	case "assigned":
		if tl.believes[who] == nil {
			tl.believes[who] = map[int32]bool{}
		}
		for _, p := range parts {
			tl.believes[who][p] = true
			if cur, ok := tl.owner[p]; ok && cur != who {
				if _, dead := tl.crashAt[cur]; !dead {
					m := tl.members[cur]
					last := time.Unix(0, m.lastHB.Load())
					rs := m.revokingSince.Load()
					if tl.overlaps[p] == nil {
						tl.overlaps[p] = map[string]bool{}
					}
					tl.overlaps[p][cur] = rs != 0
					// Fenceable: no heartbeat answered for about a session,
					// or a revocation held past the rebalance timeout.
					fenceable := now.Sub(last) > chaosSession-chaosHeartbeat-500*time.Millisecond ||
						(rs != 0 && now.Sub(time.Unix(0, rs)) > chaosRebalance-500*time.Millisecond)
					if !fenceable {
						tl.errs = append(tl.errs, fmt.Sprintf("partition %d given to %s while %s owns it (its last heartbeat answer %v ago, revoking since %v)",
							p, who, cur, now.Sub(last), func() any {
								if rs == 0 {
									return "-"
								}
								return now.Sub(time.Unix(0, rs))
							}()))
					} else {
						tl.excused++
					}
				}
			}
			tl.owner[p] = who
		}
	case "revoked", "lost":
		for _, p := range parts {
			delete(tl.believes[who], p)
			if tl.owner[p] == who {
				delete(tl.owner, p)
			}
			if ws := tl.overlaps[p]; ws != nil {
				if revoking, ok := ws[who]; ok {
					if kind == "revoked" && !revoking {
						tl.errs = append(tl.errs, fmt.Sprintf("partition %d revoked by %s after it was given to %s: the coordinator did not wait for it",
							p, who, tl.owner[p]))
					}
					delete(ws, who)
				}
			}
		}
	}
}

func (tl *chaosTimeline) failures() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.errs)
}

// owns is what each live member believes it owns, by its own callbacks.
func (tl *chaosTimeline) owns() map[string][]int32 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string][]int32{}
	for w, ps := range tl.believes {
		if _, dead := tl.crashAt[w]; dead || len(ps) == 0 {
			continue
		}
		out[w] = slices.Sorted(maps.Keys(ps))
	}
	return out
}

func runChaos(t *testing.T, proto string, seed uint64, dur time.Duration) {
	rng := rand.New(rand.NewPCG(seed, uint64(len(proto))))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	cfg.MinSessionTimeout = time.Second
	cfg.ConsumerSessionTimeout = chaosSession
	cfg.ConsumerHeartbeatInterval = chaosHeartbeat
	n := startLoaded(t, Config{Listen: "127.0.0.1:0", Store: memstore.New(), Group: cfg, ClusterID: "test",
		Logger: slog.New(slog.NewTextHandler(testlog.Writer(t), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), dur+60*time.Second)
	defer cancel()
	admin := client(t, n.Addr())
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = chaosTopic, chaosParts, 1
	ct.Topics = append(ct.Topics, rt)
	if _, err := ct.RequestWith(ctx, admin); err != nil {
		t.Fatal(err)
	}
	const groupID = "chaos"
	tl := &chaosTimeline{owner: map[int32]string{}, members: map[string]*chaosMember{}, crashAt: map[string]time.Time{},
		overlaps: map[int32]map[string]bool{}, believes: map[string]map[int32]bool{}}
	var counter atomic.Int64
	var commitMu sync.Mutex
	committed := map[int32]int64{} // accepted offsets, highest so far
	var commitErrs []string
	var accepted atomic.Int64
	refused := map[string]int{} // by error, under commitMu

	var members []*chaosMember
	var wg sync.WaitGroup
	next := 0
	newName := func() string { next++; return fmt.Sprintf("m%d", next) }
	var commit func(*chaosMember)
	start := func(name string) *chaosMember {
		m := &chaosMember{name: name, stop: make(chan struct{}), loopDone: make(chan struct{})}
		m.lastHB.Store(time.Now().UnixNano())
		opts := []kgo.Opt{
			kgo.SeedBrokers(n.Addr()), kgo.ClientID(name), kgo.Dialer(m.dial),
			kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(chaosTopic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.SessionTimeout(chaosSession), kgo.RebalanceTimeout(chaosRebalance), kgo.HeartbeatInterval(chaosHeartbeat),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(200 * time.Millisecond),
			// Requests are retried for as long as a partition lasts: a
			// commit sent before it arrives after it, from a fenced member.
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.RequestRetries(200),
			kgo.WithHooks(m),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				tl.add(name, "assigned", a[chaosTopic])
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				if len(r[chaosTopic]) == 0 {
					return
				}
				m.revokingSince.Store(time.Now().UnixNano())
				if d := time.Duration(m.slowRevoke.Load()); d > 0 {
					// A slow client: the revocation takes d (chaos, not a wait for a condition).
					select {
					case <-time.After(d):
					case <-ctx.Done():
					}
				}
				tl.add(name, "revoked", r[chaosTopic])
				m.revokingSince.Store(0)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
				tl.add(name, "lost", l[chaosTopic])
			}),
		}
		if proto == "consumer" || proto == "mixed" && next%2 == 1 {
			opts = append(opts, kgo.ServerSideBalancer())
			m.consumerProto = true
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		m.cl = cl
		pace := rand.New(rand.NewPCG(seed, uint64(next)))
		wg.Add(1)
		go func() { // the member commits what it owns, until it stops
			defer wg.Done()
			defer close(m.loopDone)
			for {
				select {
				case <-time.After(time.Duration(50+pace.IntN(250)) * time.Millisecond):
				case <-m.stop:
					return
				case <-ctx.Done():
					return
				}
				commit(m)
			}
		}()
		tl.mu.Lock()
		tl.members[name] = m
		tl.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if f := cl.PollFetches(ctx); f.IsClientClosed() {
					return
				}
			}
		}()
		return m
	}
	// commit has m commit fresh offsets for what it believes it owns.
	commit = func(m *chaosMember) {
		tl.mu.Lock()
		var ps []int32
		for p, w := range tl.owner {
			if w == m.name {
				ps = append(ps, p)
			}
		}
		tl.mu.Unlock()
		if len(ps) == 0 {
			return
		}
		offs := map[int32]kgo.EpochOffset{}
		for _, p := range ps {
			offs[p] = kgo.EpochOffset{Epoch: -1, Offset: counter.Add(1)}
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*chaosSession)
		m.cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{chaosTopic: offs},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				commitMu.Lock()
				defer commitMu.Unlock()
				if err != nil || resp == nil {
					refused[fmt.Sprint(err)]++
					return
				}
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if rp.ErrorCode != 0 {
							refused[kerr.ErrorForCode(rp.ErrorCode).Error()]++
							continue
						}
						accepted.Add(1)
						o := offs[rp.Partition].Offset
						if prev := committed[rp.Partition]; o < prev {
							commitErrs = append(commitErrs, fmt.Sprintf("partition %d: %s's commit of %d accepted after %d", rp.Partition, m.name, o, prev))
						} else {
							committed[rp.Partition] = o
						}
					}
				}
			})
		ccancel()
	}

	// The first member (on the consumer protocol in the mixed run, where it
	// is never crashed nor stopped: the group stays a consumer group, see
	// below) takes everything before the others start.
	members = append(members, start(newName()))
	testwait.For(t, 20*time.Second, "the first member's assignment", func() bool { return len(tl.owns()["m1"]) == chaosParts })
	for range 2 {
		members = append(members, start(newName()))
	}
	live := func() []*chaosMember {
		var out []*chaosMember
		for _, m := range members {
			m.mu.Lock()
			c := m.crashed
			m.mu.Unlock()
			if !c {
				out = append(out, m)
			}
		}
		return out
	}
	var crashed []*chaosMember
	counts := map[string]int{}

	// The zombie: a member other than m1 that owns partitions is cut off
	// (no dial succeeds) until the coordinator no longer lists its member
	// id, i.e. has fenced it; while it is still cut off and still believes
	// it owns its partitions, a commit with the member id and generation or
	// epoch it last had must be refused. It is then let back and rejoins.
	// The chaos leaves it alone otherwise (no crash, leave or partition),
	// so that it is live at the end. It is cut off while the group is
	// stable, so that its session expiring is what fences it: a rebalance
	// under way could drop it first (a classic member that has not
	// rejoined, a consumer member that has not revoked), while one that
	// begins after the cut gives it a rebalance timeout (here as long as a
	// session) from then, which ends after its session.
	zb := &zombieBook{rng: rand.New(rand.NewPCG(seed, 0x20b1e))}
	var zombie *chaosMember
	var zombieID chaosIdentity
	var notedAtCut []chaosIdentity // the other live members' identities then
	zombieDone := make(chan struct{})
	chaosStart := time.Now()
	startZombie := func() bool {
		own := tl.owns()
		for _, m := range live() {
			m.mu.Lock()
			off := m.cutOff
			m.mu.Unlock()
			if m.name == "m1" || off || len(own[m.name]) == 0 {
				continue
			}
			id := identityOf(m, own[m.name])
			if id.member == "" || id.epoch <= 0 || groupState(ctx, admin, groupID, proto) != "Stable" {
				continue
			}
			zombie, zombieID = m, id
			for _, o := range live() {
				if oid := identityOf(o, own[o.name]); o != m && oid.member != "" && oid.epoch > 0 {
					notedAtCut = append(notedAtCut, oid)
				}
			}
			m.mu.Lock()
			m.cutOff = true
			m.mu.Unlock()
			m.cut(false)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer close(zombieDone)
				defer func() {
					m.mu.Lock()
					m.cutOff = false
					m.mu.Unlock()
				}()
				var view map[string]chaosViewMember
				cutAt := time.Now()
				if !testwait.Until(3*(chaosSession+chaosRebalance), func() bool {
					v, ok := coordinatorMembers(ctx, admin, groupID, proto)
					if _, in := v[id.member]; ok && !in {
						view = v
						return true
					}
					return false
				}) {
					zb.fail("zombie %s (member %s): the coordinator did not fence it while it was cut off", m.name, id.member)
					return
				}
				zb.note("zombie %s cut off %v after the first three members started, fenced %v later", m.name, cutAt.Sub(chaosStart).Round(time.Millisecond), time.Since(cutAt).Round(time.Millisecond))
				zb.replay(ctx, admin, groupID, proto, "fenced while cut off", id, view, false)
			}()
			return true
		}
		return false
	}

	// The zombie is made first: its fence then overlaps the chaos rather
	// than adding a session to the run.
	testwait.For(t, 20*time.Second, "a stable group where a member other than m1 owns partitions, to make it the zombie", startZombie)
	end := time.Now().Add(dur)
	for steps := 0; time.Now().Before(end) && steps < 100000; steps++ {
		lv := live()
		m := lv[rng.IntN(len(lv))]
		switch r := rng.IntN(100); {
		case r < 30:
			counts["cut"]++
			m.cut(false)
		case r < 35 && len(lv) > 2 && !(proto == "mixed" && m.name == "m1") && m != zombie:
			counts["crash"]++
			tl.add(m.name, "crashed", nil)
			m.halt()
			m.cut(true)
			crashed = append(crashed, m)
		case r < 42 && len(lv) < 6:
			counts["join"]++
			members = append(members, start(newName()))
		case r < 45 && len(lv) > 2 && !(proto == "mixed" && m.name == "m1") && m != zombie:
			counts["leave"]++
			// A graceful leave: Close revokes and leaves.
			tl.add(m.name, "left", nil) // its later callbacks do not count; its partitions move at once
			m.halt()
			wg.Add(1)
			go func() { defer wg.Done(); m.cl.Close() }()
			members = slices.DeleteFunc(members, func(x *chaosMember) bool { return x == m })
		case r < 55:
			counts["slow"]++
			m.slowRevoke.Store(int64(time.Duration(rng.IntN(4000)) * time.Millisecond))
		case r < 60:
			m.slowRevoke.Store(0)
		case r < 63 && m != zombie:
			// Cut off for longer than a session: the coordinator fences
			// it; its commits and heartbeats are retried meanwhile.
			counts["partition"]++
			m.partition(chaosSession + time.Duration(rng.IntN(1000))*time.Millisecond)
		}
		if f := tl.failures(); len(f) > 0 {
			break
		}
		select {
		case <-time.After(time.Duration(20+rng.IntN(200)) * time.Millisecond):
		case <-ctx.Done():
		}
	}
	select {
	case <-zombieDone:
	case <-ctx.Done():
	}
	commitMu.Lock()
	tl.mu.Lock()
	t.Logf("%s: chaos %v: %v; %d callbacks, %d overlaps of fenced members; commits accepted %d, refused %v",
		proto, dur, counts, len(tl.events), tl.excused, accepted.Load(), refused)
	tl.mu.Unlock()
	commitMu.Unlock()
	for _, m := range live() {
		m.slowRevoke.Store(0)
	}
	if f := tl.failures(); len(f) > 0 {
		dumpTimeline(t, tl)
		dumpHistory(t, admin, groupID)
		t.Fatalf("seed %d: %s", seed, strings.Join(f, "; "))
	}
	commitMu.Lock()
	if len(commitErrs) > 0 {
		t.Errorf("seed %d: committed offsets went backwards: %s", seed, strings.Join(commitErrs, "; "))
	}
	commitMu.Unlock()

	// Calm: every live member ends up with a share, each partition owned once.
	lv := live()
	calm := func(lv []*chaosMember, more func() bool) bool {
		want := chaosParts / len(lv)
		own := tl.owns()
		total := 0
		for _, m := range lv {
			k := len(own[m.name])
			if k < want || k > want+1 {
				return false
			}
			total += k
		}
		if total != chaosParts {
			return false
		}
		// The coordinator's view: the same partitions for each member,
		// none for anyone else.
		view := describeOwners(ctx, admin, groupID, proto)
		for c, ps := range view {
			if len(ps) == 0 {
				delete(view, c)
			}
		}
		return fmt.Sprint(view) == fmt.Sprint(own) && (more == nil || more())
	}
	settled := func(what string, lv []*chaosMember, more func() bool) {
		ok := testwait.Until(40*time.Second, func() bool { return calm(lv, more) })
		if f := tl.failures(); len(f) > 0 {
			dumpTimeline(t, tl)
			dumpHistory(t, admin, groupID)
			t.Fatalf("seed %d: %s", seed, strings.Join(f, "; "))
		}
		if !ok {
			dumpTimeline(t, tl)
			dumpHistory(t, admin, groupID)
			t.Fatalf("seed %d: %s the %d live members own %v; the coordinator says %v",
				seed, what, len(lv), tl.owns(), describeOwners(ctx, admin, groupID, proto))
		}
	}
	settled("after the chaos", lv, nil)

	// Older identities: the members' identities noted when the zombie was
	// cut off are older than their current ones now (fencing the zombie
	// began a new generation, or raised the group epoch). A commit with
	// one, for partitions the member does not own now, is a zombie's and
	// must be refused, as must one with the fenced zombie's old identity.
	// If the chaos left no member with an older identity (all crashed,
	// left or rejoined under a new id), one more member joins to make some.
	for _, m := range lv {
		m.halt() // no more commits of theirs: the offsets checked are the zombies' alone
		select {
		case <-m.loopDone:
		case <-ctx.Done():
		}
	}
	view, ok := coordinatorMembers(ctx, admin, groupID, proto)
	if !ok {
		t.Fatalf("seed %d: describing the group failed", seed)
	}
	// older: id is a member's that is in the group at a newer generation
	// or epoch (the classic group's describe has no generation: the
	// member's client has it, the same as the coordinator's when settled).
	older := func(id chaosIdentity, view map[string]chaosViewMember) bool {
		cur, known := view[id.member]
		if !known {
			return false
		}
		if proto == "classic" {
			mid, gen := id.cm.cl.GroupMetadata()
			return mid == id.member && gen > id.epoch
		}
		return cur.epoch > id.epoch
	}
	noted := notedAtCut
	if !slices.ContainsFunc(noted, func(id chaosIdentity) bool { return older(id, view) }) {
		zb.note("no member has an older identity (of %d noted): one more joins", len(noted))
		own := tl.owns()
		noted = nil
		for _, m := range lv {
			if id := identityOf(m, own[m.name]); id.member != "" && id.epoch > 0 {
				noted = append(noted, id)
			}
		}
		extra := start(newName())
		extra.halt()
		members = append(members, extra)
		lv = append(lv, extra)
		settled("after one more member joined", lv, func() bool {
			for _, id := range noted {
				if _, e := id.cm.cl.GroupMetadata(); e <= id.epoch {
					return false
				}
			}
			return true
		})
		if view, ok = coordinatorMembers(ctx, admin, groupID, proto); !ok {
			t.Fatalf("seed %d: describing the group failed", seed)
		}
	}
	for _, id := range noted {
		if _, known := view[id.member]; !known || older(id, view) {
			zb.replay(ctx, admin, groupID, proto, "older identity of a member", id, view, false)
		}
	}
	zb.replay(ctx, admin, groupID, proto, "fenced zombie, after it rejoined", zombieID, view, true)
	zb.checkOffsets(ctx, admin, groupID)
	zb.mu.Lock()
	for _, l := range zb.log {
		t.Logf("zombies: %s", l)
	}
	if len(zb.errs) > 0 {
		t.Errorf("seed %d: %s", seed, strings.Join(zb.errs, "; "))
	}
	zb.mu.Unlock()

	for _, m := range members {
		m.halt()
	}
	for _, m := range crashed {
		m.mu.Lock()
		m.crashed = false // it may dial again to leave
		m.mu.Unlock()
		m.cl.Close()
	}
	for _, m := range lv {
		m.cl.Close()
	}
	cancel()
	wg.Wait()
}

// chaosIdentity is what a member's commits carry: its member id and its
// generation (classic) or member epoch (consumer protocol), with the
// partitions it believed it owned then.
type chaosIdentity struct {
	cm     *chaosMember
	member string
	epoch  int32
	parts  []int32
}

func identityOf(m *chaosMember, parts []int32) chaosIdentity {
	id, epoch := m.cl.GroupMetadata()
	return chaosIdentity{cm: m, member: id, epoch: epoch, parts: slices.Clone(parts)}
}

// chaosViewMember is a member as the coordinator describes it: its epoch
// (-1 in a classic group, whose describe has no generation) and partitions.
type chaosViewMember struct {
	epoch int32
	parts []int32
}

// coordinatorMembers is the coordinator's members of the group by member
// id; ok is false if the describe failed.
func coordinatorMembers(ctx context.Context, admin *kgo.Client, groupID, proto string) (map[string]chaosViewMember, bool) {
	out := map[string]chaosViewMember{}
	if proto == "classic" {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{groupID}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return nil, false
		}
		for _, m := range resp.Groups[0].Members {
			vm := chaosViewMember{epoch: -1}
			var a kmsg.ConsumerMemberAssignment
			if len(m.MemberAssignment) > 0 && a.ReadFrom(m.MemberAssignment) == nil {
				for _, tp := range a.Topics {
					if tp.Topic == chaosTopic {
						vm.parts = append(vm.parts, tp.Partitions...)
					}
				}
			}
			out[m.MemberID] = vm
		}
		return out, true
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{groupID}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return nil, false
	}
	for _, m := range resp.Groups[0].Members {
		vm := chaosViewMember{epoch: m.MemberEpoch}
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic == chaosTopic {
				vm.parts = append(vm.parts, tp.Partitions...)
			}
		}
		out[m.MemberID] = vm
	}
	return out, true
}

// groupState is the coordinator's state of the group ("" if the describe
// failed).
func groupState(ctx context.Context, admin *kgo.Client, groupID, proto string) string {
	if proto == "classic" {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{groupID}
		if resp, err := req.RequestWith(ctx, admin); err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
			return resp.Groups[0].State
		}
		return ""
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{groupID}
	if resp, err := req.RequestWith(ctx, admin); err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
		return resp.Groups[0].State
	}
	return ""
}

// zombieOffset and up are the offsets zombies commit: no member commits
// them, so a committed offset this high is a zombie's commit written.
const zombieOffset = 1 << 40

// zombieBook sends the zombies' commits and keeps what went wrong.
type zombieBook struct {
	mu      sync.Mutex
	rng     *rand.Rand
	seq     int64
	errs    []string
	log     []string
	written map[int64]bool // zombie offsets found committed
}

func (zb *zombieBook) note(format string, args ...any) {
	zb.mu.Lock()
	defer zb.mu.Unlock()
	zb.log = append(zb.log, fmt.Sprintf(format, args...))
}

func (zb *zombieBook) fail(format string, args ...any) {
	zb.mu.Lock()
	defer zb.mu.Unlock()
	zb.errs = append(zb.errs, fmt.Sprintf(format, args...))
}

// replay sends a commit with id's member id and generation or epoch, no
// longer current in view (the coordinator's members, described after id
// went stale; for a classic group the caller knows the generation moved
// on), and checks that each partition is refused with what Kafka's
// coordinator answers:
//
//   - a member id the group does not have: UNKNOWN_MEMBER_ID, in both kinds
//     of group and at every version;
//   - a classic group's member at an older generation: ILLEGAL_GENERATION;
//   - a consumer group's member at an older epoch, for partitions it does
//     not own now: STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a member on
//     the classic protocol. An older epoch is accepted for partitions the
//     member has held since that epoch, so those are not sent, unless
//     recreated says that the member was removed (fenced) since id and
//     joined again with the same member id (franz-go's consumer-protocol
//     client can rejoin so, and a consumer group takes a classic join's
//     unknown member id as a new member's, as Kafka does): then it was
//     given everything it owns after id's epoch, and those are sent too,
//     on their own (one refused partition fails the whole request).
//
// A member on the consumer protocol commits with version 9 (a client must
// use 9 or later); a classic member with a seeded version from 2 to 9.
func (zb *zombieBook) replay(ctx context.Context, admin *kgo.Client, groupID, proto, what string, id chaosIdentity, view map[string]chaosViewMember, recreated bool) {
	cur, known := view[id.member]
	switch {
	case !known:
		zb.send(ctx, admin, groupID, what, id, id.parts, kerr.UnknownMemberID.Code)
	case proto == "classic":
		zb.send(ctx, admin, groupID, what, id, id.parts, kerr.IllegalGeneration.Code)
	case cur.epoch <= id.epoch:
		zb.fail("%s %s: epoch %d is not older than its current %d", what, id.cm.name, id.epoch, cur.epoch)
	default:
		want := kerr.StaleMemberEpoch.Code
		if !id.cm.consumerProto {
			want = kerr.IllegalGeneration.Code
		}
		// The partitions it owned then and not now; any it does not own
		// now if none moved.
		moved := slices.DeleteFunc(slices.Clone(id.parts), func(p int32) bool { return slices.Contains(cur.parts, p) })
		if len(moved) == 0 {
			for p := range int32(chaosParts) {
				if !slices.Contains(cur.parts, p) {
					moved = append(moved, p)
				}
			}
		}
		zb.send(ctx, admin, groupID, what, id, moved, want)
		if recreated && len(cur.parts) > 0 {
			// What it owns now, all given to it after id's epoch.
			zb.send(ctx, admin, groupID, what+", partitions it owns again", id, cur.parts, want)
		}
	}
}

// send commits zombie offsets for parts with id's member id and epoch and
// checks that each is answered want and that none is written.
func (zb *zombieBook) send(ctx context.Context, admin *kgo.Client, groupID, what string, id chaosIdentity, parts []int32, want int16) {
	if len(parts) == 0 {
		parts = []int32{0}
	}
	zb.mu.Lock()
	version := int16(9)
	if !id.cm.consumerProto {
		version = int16(2 + zb.rng.IntN(8))
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = groupID, id.member, id.epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = chaosTopic
	for _, p := range parts {
		zb.seq++
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, zombieOffset+zb.seq
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	zb.mu.Unlock()
	desc := fmt.Sprintf("%s %s (member %s, epoch %d, OffsetCommit v%d, partitions %v)", what, id.cm.name, id.member, id.epoch, version, parts)
	r, err := admin.Request(ctx, &pinned{req, version})
	if err != nil {
		zb.fail("%s: %v", desc, err)
		return
	}
	resp := r.(*kmsg.OffsetCommitResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != want {
				zb.fail("%s: partition %d answered %v, want %v", desc, p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want))
			}
		}
	}
	zb.mu.Lock()
	zb.log = append(zb.log, fmt.Sprintf("%s: %v", desc, kerr.ErrorForCode(want)))
	zb.mu.Unlock()
	zb.checkOffsets(ctx, admin, groupID)
}

// checkOffsets fails if a zombie's offset is committed.
func (zb *zombieBook) checkOffsets(ctx context.Context, admin *kgo.Client, groupID string) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = groupID
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = chaosTopic
	for p := range int32(chaosParts) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	r, err := admin.Request(ctx, &pinned{req, 7})
	if err != nil {
		zb.fail("fetching the offsets: %v", err)
		return
	}
	for _, t := range r.(*kmsg.OffsetFetchResponse).Topics {
		for _, p := range t.Partitions {
			zb.mu.Lock()
			seen := zb.written[p.Offset]
			if zb.written == nil {
				zb.written = map[int64]bool{}
			}
			zb.written[p.Offset] = true
			zb.mu.Unlock()
			if p.Offset >= zombieOffset && !seen {
				zb.fail("partition %d: a zombie's commit of %d was written", p.Partition, p.Offset)
			}
		}
	}
}

// describeOwners is what the coordinator says each member (by client id)
// is assigned: ConsumerGroupDescribe for a consumer group, DescribeGroups
// for a classic one. nil if the request fails.
func describeOwners(ctx context.Context, admin *kgo.Client, groupID, proto string) map[string][]int32 {
	out := map[string][]int32{}
	if proto == "classic" {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{groupID}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 {
			return nil
		}
		for _, m := range resp.Groups[0].Members {
			var a kmsg.ConsumerMemberAssignment
			if len(m.MemberAssignment) == 0 || a.ReadFrom(m.MemberAssignment) != nil {
				continue
			}
			for _, tp := range a.Topics {
				if tp.Topic == chaosTopic {
					out[m.ClientID] = append(out[m.ClientID], tp.Partitions...)
				}
			}
		}
	} else {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{groupID}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 {
			return nil
		}
		for _, m := range resp.Groups[0].Members {
			for _, tp := range m.Assignment.TopicPartitions {
				if tp.Topic == chaosTopic {
					out[m.ClientID] = append(out[m.ClientID], tp.Partitions...)
				}
			}
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// dumpHistory logs the coordinator's history of the group.
func dumpHistory(t *testing.T, admin *kgo.Client, groupID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{groupID}
	d.Version = 5
	group.RequestHistory(d, -1)
	r, err := admin.Request(ctx, &pinned{d, 5})
	if err != nil {
		t.Logf("history: %v", err)
		return
	}
	doc, ok := group.HistoryTagOf(&r.(*kmsg.DescribeGroupsResponse).Groups[0])
	if !ok {
		t.Log("no history")
		return
	}
	for _, e := range doc.History {
		b, _ := json.Marshal(e)
		t.Logf("history: %s", b)
	}
}

func dumpTimeline(t *testing.T, tl *chaosTimeline) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	evs := tl.events
	if len(evs) > 300 {
		evs = evs[len(evs)-300:]
	}
	t0 := tl.events[0].at
	for _, e := range evs {
		t.Logf("%8.3fs (%s) %s %s %v", e.at.Sub(t0).Seconds(), e.at.UTC().Format("15:04:05.000"), e.who, e.kind, e.parts)
	}
}
