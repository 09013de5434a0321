package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	// stop ends the member's commit loop (crash or leave).
	stop     chan struct{}
	stopOnce sync.Once
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
	case "assigned":
		for _, p := range parts {
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

// owns is what each live member believes it owns.
func (tl *chaosTimeline) owns() map[string][]int32 {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string][]int32{}
	for p, w := range tl.owner {
		if _, dead := tl.crashAt[w]; !dead {
			out[w] = append(out[w], p)
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
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
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
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
		overlaps: map[int32]map[string]bool{}}
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
		m := &chaosMember{name: name, stop: make(chan struct{})}
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
	end := time.Now().Add(dur)
	for steps := 0; time.Now().Before(end) && steps < 100000; steps++ {
		lv := live()
		m := lv[rng.IntN(len(lv))]
		switch r := rng.IntN(100); {
		case r < 30:
			counts["cut"]++
			m.cut(false)
		case r < 35 && len(lv) > 2 && !(proto == "mixed" && m.name == "m1"):
			counts["crash"]++
			tl.add(m.name, "crashed", nil)
			m.halt()
			m.cut(true)
			crashed = append(crashed, m)
		case r < 42 && len(lv) < 6:
			counts["join"]++
			members = append(members, start(newName()))
		case r < 45 && len(lv) > 2 && !(proto == "mixed" && m.name == "m1"):
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
		case r < 63:
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
	want := chaosParts / len(lv)
	ok := testwait.Until(40*time.Second, func() bool {
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
		return fmt.Sprint(view) == fmt.Sprint(own)
	})
	if f := tl.failures(); len(f) > 0 {
		dumpTimeline(t, tl)
		dumpHistory(t, admin, groupID)
		t.Fatalf("seed %d: %s", seed, strings.Join(f, "; "))
	}
	if !ok {
		dumpTimeline(t, tl)
		dumpHistory(t, admin, groupID)
		t.Fatalf("seed %d: after the chaos the %d live members own %v; the coordinator says %v",
			seed, len(lv), tl.owns(), describeOwners(ctx, admin, groupID, proto))
	}
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
