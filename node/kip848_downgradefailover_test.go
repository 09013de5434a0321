package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/coordinator"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/byname"
	"github.com/cohort-dev/cohort/internal/cutproxy"
	"github.com/cohort-dev/cohort/internal/testkafka"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

const downgradeTopic = "work"

// classicDriver is a classic consumer (JoinGroup, SyncGroup, Heartbeat of
// protocol type "consumer", eager "range") driven with raw requests, as a
// client library would: it answers MEMBER_ID_REQUIRED, starts over without
// a member id on UNKNOWN_MEMBER_ID, retries a coordinator that moved or is
// loading, and rejoins when a heartbeat says so. Its leader assigns the
// topic's partitions in ranges in member id order.
type classicDriver struct {
	group string
	cl    *kgo.Client
	parts int32

	mu       sync.Mutex
	id       string
	gen      int32
	assigned []int32
	synced   bool // the last join ended with a SyncGroup that succeeded
}

func (m *classicDriver) state() (id string, gen int32, assigned []int32, synced bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.id, m.gen, slices.Clone(m.assigned), m.synced
}

// run joins, syncs and heartbeats until ctx ends.
func (m *classicDriver) run(ctx context.Context) {
	for ctx.Err() == nil {
		if !m.joinSync(ctx) {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		for ctx.Err() == nil {
			id, gen, _, _ := m.state()
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = m.group, id, gen
			resp, err := hb.RequestWith(ctx, m.cl)
			if err != nil || resp.ErrorCode == group.ErrNotCoordinator || resp.ErrorCode == group.ErrCoordinatorLoading ||
				resp.ErrorCode == group.ErrCoordinatorNotAvailable {
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			if resp.ErrorCode == 0 {
				sleepCtx(ctx, 100*time.Millisecond)
				continue
			}
			m.mu.Lock()
			m.synced = false
			if resp.ErrorCode == group.ErrUnknownMemberID {
				m.id = ""
			}
			m.mu.Unlock()
			break // rejoin
		}
	}
}

// joinSync runs one JoinGroup (and the one that MEMBER_ID_REQUIRED asks
// for) and its SyncGroup; true if both succeeded.
func (m *classicDriver) joinSync(ctx context.Context) bool {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{downgradeTopic}
	var jr *kmsg.JoinGroupResponse
	for tries := 0; ; tries++ {
		id, _, _, _ := m.state()
		j := kmsg.NewPtrJoinGroupRequest()
		j.Group, j.MemberID, j.ProtocolType = m.group, id, "consumer"
		j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = 30000, 20000
		j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
		resp, err := j.RequestWith(ctx, m.cl)
		if err != nil {
			return false
		}
		switch resp.ErrorCode {
		case group.ErrMemberIDRequired:
			m.mu.Lock()
			m.id = resp.MemberID
			m.mu.Unlock()
			if tries < 3 {
				continue
			}
			return false
		case group.ErrUnknownMemberID:
			m.mu.Lock()
			m.id = ""
			m.mu.Unlock()
			return false
		case 0:
			jr = resp
		default:
			return false
		}
		break
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = m.group, jr.MemberID, jr.Generation
	pt, p := "consumer", "range"
	s.ProtocolType, s.Protocol = &pt, &p
	if jr.LeaderID == jr.MemberID && len(jr.Members) > 0 {
		var ids []string
		for _, mem := range jr.Members {
			ids = append(ids, mem.MemberID)
		}
		slices.Sort(ids)
		for i, id := range ids {
			a := kmsg.NewConsumerMemberAssignment()
			tp := kmsg.NewConsumerMemberAssignmentTopic()
			tp.Topic = downgradeTopic
			for q := int32(0); q < m.parts; q++ {
				if int(q)*len(ids)/int(m.parts) == i {
					tp.Partitions = append(tp.Partitions, q)
				}
			}
			a.Topics = []kmsg.ConsumerMemberAssignmentTopic{tp}
			s.GroupAssignment = append(s.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a.AppendTo(nil)})
		}
	}
	sr, err := s.RequestWith(ctx, m.cl)
	if err != nil || sr.ErrorCode != 0 {
		return false
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(sr.MemberAssignment); err != nil && len(sr.MemberAssignment) > 0 {
		return false
	}
	var assigned []int32
	for _, tp := range a.Topics {
		if tp.Topic == downgradeTopic {
			assigned = append(assigned, tp.Partitions...)
		}
	}
	slices.Sort(assigned)
	m.mu.Lock()
	m.id, m.gen, m.assigned, m.synced = jr.MemberID, jr.Generation, assigned, true
	m.mu.Unlock()
	return true
}

// retryCoordinator sends req until its answer is not one of a coordinator
// moving or loading (bounded); code reads the answer's error.
func retryCoordinator[R kmsg.Response](t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request, code func(R) int16) R {
	t.Helper()
	var last R
	var lastErr error
	ok := testwait.Until(20*time.Second, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cl.Request(rctx, req)
		if err != nil {
			lastErr = err
			return false
		}
		last = resp.(R)
		switch code(last) {
		case group.ErrNotCoordinator, group.ErrCoordinatorLoading, group.ErrCoordinatorNotAvailable:
			return false
		}
		return true
	})
	if !ok {
		t.Fatalf("%T: no answer from a loaded coordinator: %v %+v", req, lastErr, last)
	}
	return last
}

// classicView is what a classic group answers about itself and its
// offsets, in a form that compares.
type classicView struct {
	state, protocolType, protocol string
	members                       string // "id=[partitions]" sorted
	offsets                       map[int32]int64
	consumerGroupErr              int16 // ConsumerGroupDescribe's error for the group
}

func (v classicView) String() string {
	return fmt.Sprintf("state %s, type %q, protocol %q, members %s, offsets %v, ConsumerGroupDescribe error %d",
		v.state, v.protocolType, v.protocol, v.members, v.offsets, v.consumerGroupErr)
}

func viewClassic(t *testing.T, ctx context.Context, cl *kgo.Client, gid string, parts int32) classicView {
	t.Helper()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{gid}
	dr := retryCoordinator(t, ctx, cl, d, func(r *kmsg.DescribeGroupsResponse) int16 { return r.Groups[0].ErrorCode })
	g := dr.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("DescribeGroups %s: error %d", gid, g.ErrorCode)
	}
	v := classicView{state: g.State, protocolType: g.ProtocolType, protocol: g.Protocol, offsets: map[int32]int64{}}
	var ms []string
	for _, m := range g.Members {
		var a kmsg.ConsumerMemberAssignment
		var ps []int32
		if a.ReadFrom(m.MemberAssignment) == nil {
			for _, tp := range a.Topics {
				ps = append(ps, tp.Partitions...)
			}
		}
		slices.Sort(ps)
		ms = append(ms, fmt.Sprintf("%s=%v", m.MemberID, ps))
	}
	slices.Sort(ms)
	v.members = strings.Join(ms, " ")
	c := kmsg.NewPtrConsumerGroupDescribeRequest()
	c.Groups = []string{gid}
	cr := retryCoordinator(t, ctx, cl, c, func(r *kmsg.ConsumerGroupDescribeResponse) int16 { return r.Groups[0].ErrorCode })
	v.consumerGroupErr = cr.Groups[0].ErrorCode
	f := testkafka.OffsetFetchRequest(gid, downgradeTopic, parts)
	fr := retryCoordinator(t, ctx, cl, f, func(r *kmsg.OffsetFetchResponse) int16 { return r.ErrorCode })
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("OffsetFetch %s/%d: error %d", gid, p.Partition, p.ErrorCode)
			}
			if p.Offset >= 0 {
				v.offsets[p.Partition] = p.Offset
			}
		}
	}
	return v
}

// commitAs commits offsets as a member (generation or member epoch gen)
// and fails the test unless every partition is accepted.
func commitAs(t *testing.T, ctx context.Context, cl *kgo.Client, gid, member string, gen int32, offs map[int32]int64) {
	t.Helper()
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Group, c.MemberID, c.Generation = gid, member, gen
	tp := kmsg.NewOffsetCommitRequestTopic()
	tp.Topic = downgradeTopic
	for p, o := range offs {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = p, o
		tp.Partitions = append(tp.Partitions, pp)
	}
	c.Topics = []kmsg.OffsetCommitRequestTopic{tp}
	cr := retryCoordinator(t, ctx, cl, c, func(r *kmsg.OffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode })
	for _, p := range cr.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit of %s generation %d, partition %d: error %d", member, gen, p.Partition, p.ErrorCode)
		}
	}
}

// downgradeFailoverCase: on a three-node cluster, a KIP-848 group coordinated
// by node 1 holds a consumer-protocol member A and a classic member C, both
// of which commit offsets. A leaves, so the group turns classic with a
// rebalance pending; a new classic member D joins and waits in that
// rebalance on node 1. takeDown then removes node 1 as the coordinator and
// the group's partition moves to a survivor, which loads it from etcd.
// There: ConsumerGroupDescribe finds no consumer group (nothing of A's
// state came back), C and D complete JoinGroup and SyncGroup in one
// generation, split the partitions, and C's heartbeat at its
// consumer-protocol-era generation is told to rejoin; the offsets
// committed before the move are all there and C commits in the new
// generation. Then the new coordinator stops too and the last node loads
// the group once more: it answers exactly as before (members, assignments,
// protocol, offsets, no consumer group) and both members' heartbeats at
// their generation succeed.
func downgradeFailoverCase(t *testing.T, ec *etcdtest.Cluster, node1Etcd []string, racing bool, takeDown func(ns []*Node) (alive []*Node)) {
	ns := startCluster848(t, ec, 3, node1Etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const parts = 4
	gid := groupOwnedBy(t, ns[1], 1, "g848-downgrade")
	if _, err := ns[2].Catalog().Create(downgradeTopic, parts, nil); err != nil {
		t.Fatal(err)
	}
	newClient := func(addrs ...string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), byname.Opt(), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	all := []string{ns[0].Addr(), ns[1].Addr(), ns[2].Addr()}
	cl := newClient(all...)

	// A, the consumer-protocol member, until the topic reached node 1's
	// catalog and A has partitions.
	a := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	a.Group, a.MemberID, a.MemberEpoch, a.RebalanceTimeoutMillis = gid, "member-a", 0, 20000
	a.SubscribedTopicNames = []string{downgradeTopic}
	a.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var aEpoch int32
	testwait.For(t, 15*time.Second, "member A assigned partitions", func() bool {
		resp, err := a.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			return false
		}
		aEpoch = resp.MemberEpoch
		a.MemberEpoch = resp.MemberEpoch
		a.SubscribedTopicNames = nil // unchanged from here
		if resp.Assignment == nil || len(resp.Assignment.Topics) == 0 {
			time.Sleep(100 * time.Millisecond)
			return false
		}
		return true
	})

	// C, classic, joins the consumer group and syncs once.
	c := &classicDriver{group: gid, cl: newClient(all...), parts: parts}
	testwait.For(t, 10*time.Second, "classic member C joined the consumer group", func() bool { return c.joinSync(ctx) })
	cID, cGen, _, _ := c.state()
	if cGen < aEpoch {
		t.Fatalf("C joined at generation %d, below A's epoch %d", cGen, aEpoch)
	}
	commitAs(t, ctx, cl, gid, "member-a", aEpoch, map[int32]int64{0: 100, 1: 101})
	commitAs(t, ctx, cl, gid, cID, cGen, map[int32]int64{2: 200, 3: 201})
	want := map[int32]int64{0: 100, 1: 101, 2: 200, 3: 201}

	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.Group, leave.MemberID, leave.MemberEpoch = gid, "member-a", -1
	d := &classicDriver{group: gid, cl: newClient(all...), parts: parts}
	dctx, dstop := context.WithCancel(ctx)
	defer dstop()
	var wg sync.WaitGroup
	defer wg.Wait()
	p := coordinator.PartitionFor(gid, k848Parts)
	var start time.Time
	var alive []*Node
	leaveOutcome := "acknowledged before the move"
	if !racing {
		// The downgrade: A leaves; the group is classic with C,
		// rebalancing.
		if resp, err := leave.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("A's leave: %v %+v", err, resp)
		}
		if ns[1].Cluster().Owner(p) != 1 {
			t.Fatal("the group's partition moved before the failover")
		}
		before := viewClassic(t, ctx, cl, gid, parts)
		if before.state != "PreparingRebalance" || before.protocolType != "consumer" || before.consumerGroupErr != group.ErrGroupIDNotFound {
			t.Fatalf("after A's leave, before the failover: %v; want a classic group rebalancing", before)
		}

		// D joins on node 1 and waits there for C.
		parked := make(chan struct{})
		go func() { defer close(parked); d.joinSync(dctx) }()
		node1 := newClient(ns[0].Addr())
		testwait.For(t, 10*time.Second, "D waiting in the rebalance on node 1", func() bool {
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Groups = []string{gid}
			resp, err := dg.RequestWith(ctx, node1)
			return err == nil && resp.Groups[0].ErrorCode == 0 && len(resp.Groups[0].Members) == 2 && resp.Groups[0].State == "PreparingRebalance"
		})
		start = time.Now()
		alive = takeDown(ns)
		// D's parked JoinGroup ends (NOT_COORDINATOR on node 1; if its
		// client tries the new coordinator with its member id, that one
		// does not know it). Only then does anything reach the new
		// coordinator's group, so that what C's heartbeat is told below
		// comes from the load alone.
		select {
		case <-parked:
		case <-time.After(25 * time.Second):
			t.Fatal("D's JoinGroup parked on node 1 was not answered after the failover")
		}
		if id, _, _, synced := d.state(); synced {
			t.Fatalf("D (%s) completed a join across the failover", id)
		}
	} else {
		// A's leave is sent as node 1 loses etcd: its write is in
		// flight when node 1 gives the partition up. It is acknowledged
		// or not (node 1's own answer: the client does not retry); the
		// group after the move must be one or the other, whole, and an
		// acknowledged leave must be in it.
		type answer struct {
			resp *kmsg.ConsumerGroupHeartbeatResponse
			err  error
		}
		answered := make(chan answer, 1)
		// No retry: the answer is node 1's own.
		lcl, err := kgo.NewClient(kgo.SeedBrokers(all...), byname.Opt(), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer lcl.Close()
		go func() {
			lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
			defer lcancel()
			resp, err := leave.RequestWith(lctx, lcl)
			answered <- answer{resp, err}
		}()
		start = time.Now()
		alive = takeDown(ns)
		a := <-answered
		switch {
		case a.err != nil:
			leaveOutcome = fmt.Sprintf("not acknowledged (%v)", a.err)
		case a.resp.ErrorCode != 0:
			leaveOutcome = fmt.Sprintf("not acknowledged (error %d)", a.resp.ErrorCode)
		default:
			leaveOutcome = fmt.Sprintf("acknowledged %v after the move started", time.Since(start).Round(time.Millisecond))
		}
	}
	var o int32
	if !testwait.Until(20*time.Second, func() bool { o = alive[0].Cluster().Owner(p); return o == 2 || o == 3 }) {
		t.Fatalf("partition %d of group %s still with node %d after %v", p, gid, o, time.Since(start))
	}
	moved := time.Since(start)
	waitClusterSettled(t, 20*time.Second, alive...)
	survivors := newClient(alive[0].Addr(), alive[1].Addr())
	if racing {
		cd := kmsg.NewPtrConsumerGroupDescribeRequest()
		cd.Groups = []string{gid}
		cg := retryCoordinator(t, ctx, survivors, cd, func(r *kmsg.ConsumerGroupDescribeResponse) int16 { return r.Groups[0].ErrorCode }).Groups[0]
		switch {
		case cg.ErrorCode == group.ErrGroupIDNotFound:
			leaveOutcome += ", stored"
		case cg.ErrorCode != 0:
			t.Fatalf("ConsumerGroupDescribe on node %d: error %d", o, cg.ErrorCode)
		case strings.HasPrefix(leaveOutcome, "acknowledged"):
			var ids []string
			for _, m := range cg.Members {
				ids = append(ids, m.MemberID)
			}
			t.Fatalf("A's leave was %s, but node %d has the consumer group (%s, epoch %d, members %v)", leaveOutcome, o, cg.State, cg.Epoch, ids)
		default:
			// The leave was lost with node 1: the group is the
			// consumer group it was, A in it; A leaves again, here.
			if !slices.ContainsFunc(cg.Members, func(m kmsg.ConsumerGroupDescribeResponseGroupMember) bool { return m.MemberID == "member-a" }) {
				t.Fatalf("node %d has the consumer group without A: %+v", o, cg)
			}
			leaveOutcome += ", not stored (A left again on the new coordinator)"
			lresp := retryCoordinator(t, ctx, survivors, leave, func(r *kmsg.ConsumerGroupHeartbeatResponse) int16 { return r.ErrorCode })
			if lresp.ErrorCode != 0 {
				t.Fatalf("A's second leave, on node %d: error %d", o, lresp.ErrorCode)
			}
		}
	}

	// C's heartbeat at the generation it had in the consumer group: the
	// pending rebalance was loaded with the group.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = gid, cID, cGen
	if code := retryCoordinator(t, ctx, survivors, hb, func(r *kmsg.HeartbeatResponse) int16 { return r.ErrorCode }).ErrorCode; code != group.ErrRebalanceInProgress {
		t.Errorf("C's heartbeat at generation %d on node %d: error %d, want REBALANCE_IN_PROGRESS", cGen, o, code)
	}
	// Each member on connections of its own, as separate consumers are:
	// a broker answers a connection's requests in order, so D's JoinGroup
	// waiting for C would hold back C's SyncGroup on a shared one.
	c.cl, d.cl = newClient(alive[0].Addr(), alive[1].Addr()), newClient(alive[0].Addr(), alive[1].Addr())
	wg.Add(2)
	go func() { defer wg.Done(); c.run(dctx) }()
	go func() { defer wg.Done(); d.run(dctx) }()
	var cs, ds []int32
	var gen int32
	if !testwait.Until(20*time.Second, func() bool {
		_, cg, ca, cok := c.state()
		_, dg, da, dok := d.state()
		cs, ds, gen = ca, da, cg
		if !cok || !dok || cg != dg || len(ca) == 0 || len(da) == 0 || len(ca)+len(da) != parts {
			return false
		}
		return !slices.ContainsFunc(ca, func(q int32) bool { return slices.Contains(da, q) })
	}) {
		cid, cg, ca, cok := c.state()
		did, dg, da, dok := d.state()
		t.Fatalf("C (%s generation %d %v synced %v) and D (%s generation %d %v synced %v) did not settle in one generation on node %d",
			cid, cg, ca, cok, did, dg, da, dok, o)
	}
	if gen <= cGen {
		t.Errorf("classic generation %d after the failover, not past C's consumer-protocol generation %d", gen, cGen)
	}
	dstop()
	wg.Wait()
	cID, _, _, _ = c.state()
	dID, _, _, _ := d.state()
	commitAs(t, ctx, survivors, gid, cID, gen, map[int32]int64{cs[0]: 300})
	want[cs[0]] = 300
	after := viewClassic(t, ctx, survivors, gid, parts)
	wantMembers := []string{fmt.Sprintf("%s=%v", cID, cs), fmt.Sprintf("%s=%v", dID, ds)}
	slices.Sort(wantMembers)
	if after.state != "Stable" || after.protocolType != "consumer" || after.protocol != "range" ||
		after.members != strings.Join(wantMembers, " ") || after.consumerGroupErr != group.ErrGroupIDNotFound || !maps.Equal(after.offsets, want) {
		t.Fatalf("on node %d after the failover: %v\nwant Stable consumer/range, members %v, offsets %v, no consumer group", o, after, wantMembers, want)
	}

	// Reload once more: the new coordinator stops, the last node loads
	// the group from etcd.
	var last *Node
	for _, n := range alive {
		if n == ns[o-1] {
			if err := n.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			last = n
		}
	}
	lastID := int32(slices.Index(ns, last) + 1)
	testwait.For(t, 20*time.Second, "the group's partition on the last node", func() bool { return last.Cluster().Owner(p) == lastID })
	final := newClient(last.Addr())
	reloaded := viewClassic(t, ctx, final, gid, parts)
	if reloaded.String() != after.String() {
		t.Errorf("the group loaded again differs:\n  before %v\n  after  %v", after, reloaded)
	}
	for _, m := range []string{cID, dID} {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.MemberID, hb.Generation = gid, m, gen
		if code := retryCoordinator(t, ctx, final, hb, func(r *kmsg.HeartbeatResponse) int16 { return r.ErrorCode }).ErrorCode; code != 0 {
			t.Errorf("heartbeat of %s at generation %d after the second load: error %d", m, gen, code)
		}
	}
	t.Logf("A's leave %s; partition moved %v after node 1 went; classic generation %d (C had %d as a member of the consumer group); C %v, D %v",
		leaveOutcome, moved, gen, cGen, cs, ds)
}

// TestKIP848DowngradeCoordinatorStops: downgradeFailoverCase where node 1
// stops (node.Close: it hands its partitions over), answering D's parked
// JoinGroup NOT_COORDINATOR.
func TestKIP848DowngradeCoordinatorStops(t *testing.T) {
	downgradeFailoverCase(t, etcdtest.Start(t, 1), nil, false, func(ns []*Node) []*Node {
		if err := ns[0].Close(); err != nil {
			t.Fatal(err)
		}
		return ns[1:]
	})
}

// TestKIP848DowngradeCoordinatorLeaseExpires: downgradeFailoverCase where
// node 1 loses etcd (a proxy the test cuts) and with it its lease, while
// its process and listener keep running.
func TestKIP848DowngradeCoordinatorLeaseExpires(t *testing.T) { downgradeLeaseCase(t, false) }

// TestKIP848DowngradeRacesCoordinatorLoss: downgradeFailoverCase where A's
// leave, which starts the downgrade, is sent as node 1 loses etcd, so the
// downgrade's write races the lease: whether the leave was acknowledged
// and stored or not, the group on the new coordinator is either the
// classic group (with its pending rebalance) or the whole consumer group
// (A still in it, and an acknowledged leave must not be lost), never a mix.
func TestKIP848DowngradeRacesCoordinatorLoss(t *testing.T) { downgradeLeaseCase(t, true) }

// downgradeLeaseCase runs downgradeFailoverCase with node 1 reaching etcd
// through a proxy that the test cuts.
func downgradeLeaseCase(t *testing.T, racing bool) {
	ec := etcdtest.Start(t, 1)
	px := cutproxy.Start(t, strings.TrimPrefix(ec.Endpoints()[0], "http://"))
	downgradeFailoverCase(t, ec, []string{"http://" + px.Addr()}, racing, func(ns []*Node) []*Node {
		px.Cut()
		return ns[1:]
	})
}
