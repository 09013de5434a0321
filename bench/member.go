package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/cohort-dev/cohort/internal/byname"
)

// Timeouts every simulated member asks for. The session timeout is long
// enough that a member idle between two phases of a run is never evicted;
// both are inside the default bounds of Kafka, kfake and cohort.
const (
	sessionTimeout   = 45 * time.Second
	rebalanceTimeout = 60 * time.Second
	protocolType     = "consumer"
	protocolName     = "range"
	benchTopic       = "cohort-bench"
)

// memberMetadata is a consumer-protocol subscription to benchTopic: what a
// real consumer would send, so that targets that look at it see the usual
// shape.
var memberMetadata = func() []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = []string{benchTopic}
	return m.AppendTo(nil)
}()

// assignmentFor is the trivial assignment the leader hands member i: one
// partition of benchTopic.
func assignmentFor(i int) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 0
	t := kmsg.NewConsumerMemberAssignmentTopic()
	t.Topic = benchTopic
	t.Partitions = []int32{int32(i)}
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{t}
	return a.AppendTo(nil)
}

// versions caps what the clients negotiate so that every target gets the
// same requests: OffsetCommit and OffsetFetch stop at v9 (byname; v10 names
// topics by ID, which a coordinator without a topic catalog cannot resolve).
func versions() *kversion.Versions { return byname.Versions() }

// newClient is one simulated process: its own kgo client, hence its own
// TCP connections to the coordinator (kgo keeps join/sync on one connection
// and everything else on another, and answers requests of one connection in
// order, as Kafka brokers do). sec says how it connects (nil: plaintext).
func newClient(bootstrap, clientID string, sec *security) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID(clientID),
		kgo.MaxVersions(versions()),
		kgo.ConnIdleTimeout(5 * time.Minute),
		kgo.RequestRetries(3),
	}
	if sec != nil {
		opts = append(opts, sec.opts...)
	}
	return kgo.NewClient(opts...)
}

// member is one simulated group member speaking raw JoinGroup/SyncGroup/
// Heartbeat through its own client.
type member struct {
	idx   int
	group string
	cl    *kgo.Client
	// raw, when set, carries the member's requests instead of cl (one
	// bare connection per member: bigRebalance's 10,000 members), and
	// poll replaces waitPoll.
	raw  *rawConn
	poll time.Duration

	id         string
	gen        int32
	assignment []byte
}

// newMember creates the client and opens its connections before any
// measurement: a Heartbeat for the group (answered with an error, it opens
// the connection used for heartbeats and looks up the coordinator) and the
// KIP-394 JoinGroup round trip that hands out the member id (it opens the
// join/sync connection). The member is then pending in the group.
func newMember(ctx context.Context, bootstrap string, sec *security, group string, idx int) (*member, error) {
	cl, err := newClient(bootstrap, fmt.Sprintf("cohort-bench-%d", idx), sec)
	if err != nil {
		return nil, err
	}
	m := &member{idx: idx, group: group, cl: cl}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = group, "cohort-bench-warmup", -1
	if _, err := hb.RequestWith(ctx, cl); err != nil {
		cl.Close()
		return nil, fmt.Errorf("member %d: warm-up heartbeat: %w", idx, err)
	}
	resp, err := m.joinReq().RequestWith(ctx, cl)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("member %d: first JoinGroup: %w", idx, err)
	}
	if resp.ErrorCode != kerr.MemberIDRequired.Code || resp.MemberID == "" {
		cl.Close()
		return nil, fmt.Errorf("member %d: first JoinGroup v%d answered %v, want MEMBER_ID_REQUIRED with an id (KIP-394, JoinGroup v4+)",
			idx, resp.Version, kerr.ErrorForCode(resp.ErrorCode))
	}
	m.id = resp.MemberID
	return m, nil
}

// newMembers creates n members of group concurrently (a bounded number at
// a time). On error the ones created are closed.
func newMembers(ctx context.Context, bootstrap string, sec *security, group string, first, n int) ([]*member, error) {
	ms := make([]*member, n)
	if err := boundedEach(n, 32, func(i int) (err error) {
		ms[i], err = newMember(ctx, bootstrap, sec, group, first+i)
		return err
	}); err != nil {
		// The members created are pending in the group: take them (and
		// the group) out rather than leave them behind.
		var joined []*member
		for _, m := range ms {
			if m != nil {
				joined = append(joined, m)
			}
		}
		leaveAll(ctx, joined)
		closeMembers(ms)
		return nil, err
	}
	return ms, nil
}

func closeMembers(ms []*member) {
	var wg sync.WaitGroup
	for _, m := range ms {
		if m != nil {
			wg.Add(1)
			go func() { defer wg.Done(); m.cl.Close() }()
		}
	}
	wg.Wait()
}

func (m *member) joinReq() *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group = m.group
	r.MemberID = m.id
	r.SessionTimeoutMillis = int32(sessionTimeout / time.Millisecond)
	r.RebalanceTimeoutMillis = int32(rebalanceTimeout / time.Millisecond)
	r.ProtocolType = protocolType
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = protocolName, memberMetadata
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}

// joinSync joins and syncs until the member holds an assignment. sent is
// called just before the first JoinGroup goes out.
func (m *member) joinSync(ctx context.Context, sent func(time.Time)) error {
	for attempt := 0; ; attempt++ {
		if attempt > 1000 {
			return fmt.Errorf("member %d: no assignment after %d join attempts", m.idx, attempt)
		}
		req := m.joinReq()
		if sent != nil {
			sent(time.Now())
			sent = nil
		}
		jr, err := request(ctx, m, req, kmsg.NewPtrJoinGroupResponse)
		if err != nil {
			return fmt.Errorf("member %d: JoinGroup: %w", m.idx, err)
		}
		switch jr.ErrorCode {
		case 0:
		case kerr.MemberIDRequired.Code:
			m.id = jr.MemberID
			continue
		case kerr.UnknownMemberID.Code:
			m.id = ""
			continue
		case kerr.RebalanceInProgress.Code:
			continue
		default:
			return fmt.Errorf("member %d: JoinGroup: %w", m.idx, kerr.ErrorForCode(jr.ErrorCode))
		}
		m.id, m.gen = jr.MemberID, jr.Generation
		sr := kmsg.NewPtrSyncGroupRequest()
		sr.Group, sr.MemberID, sr.Generation = m.group, m.id, m.gen
		pt, pn := protocolType, protocolName
		sr.ProtocolType, sr.Protocol = &pt, &pn
		if jr.LeaderID == m.id {
			sr.GroupAssignment = make([]kmsg.SyncGroupRequestGroupAssignment, len(jr.Members))
			for i, jm := range jr.Members {
				sr.GroupAssignment[i] = kmsg.SyncGroupRequestGroupAssignment{MemberID: jm.MemberID, MemberAssignment: assignmentFor(i)}
			}
		}
		sresp, err := request(ctx, m, sr, kmsg.NewPtrSyncGroupResponse)
		if err != nil {
			return fmt.Errorf("member %d: SyncGroup: %w", m.idx, err)
		}
		switch sresp.ErrorCode {
		case 0:
			if len(sresp.MemberAssignment) == 0 {
				return fmt.Errorf("member %d: SyncGroup gen %d: empty assignment", m.idx, m.gen)
			}
			m.assignment = sresp.MemberAssignment
			return nil
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			continue
		case kerr.UnknownMemberID.Code:
			m.id = ""
			continue
		default:
			return fmt.Errorf("member %d: SyncGroup: %w", m.idx, kerr.ErrorForCode(sresp.ErrorCode))
		}
	}
}

// heartbeat sends one Heartbeat for the member's generation.
func (m *member) heartbeat(ctx context.Context) (int16, error) {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = m.group, m.id, m.gen
	resp, err := request(ctx, m, r, kmsg.NewPtrHeartbeatResponse)
	if err != nil {
		return 0, err
	}
	return resp.ErrorCode, nil
}

// request sends req (its version unset) through the member's raw
// connection at the highest version both sides speak, or through its
// client.
func request[R kmsg.Response](ctx context.Context, m *member, req kmsg.Request, newResp func() R) (R, error) {
	var zero R
	if m.raw == nil {
		resp, err := m.cl.Request(ctx, req)
		if err != nil {
			return zero, err
		}
		return resp.(R), nil
	}
	v, err := m.raw.version(req, req.MaxVersion())
	if err != nil {
		return zero, err
	}
	req.SetVersion(v)
	resp := newResp()
	if err := m.raw.do(ctx, req, resp); err != nil {
		return zero, err
	}
	return resp, nil
}

// round tracks one rebalance: it ends when want members hold an assignment
// in the same generation.
type round struct {
	want   int
	synced map[int32]int
	mu     sync.Mutex
	done   chan struct{}
	doneAt time.Time
	gen    int32
}

func newRound(want int) *round {
	return &round{want: want, synced: map[int32]int{}, done: make(chan struct{})}
}

func (r *round) report(gen int32, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.synced[gen]++
	if r.synced[gen] == r.want && r.doneAt.IsZero() {
		r.doneAt, r.gen = at, gen
		close(r.done)
	}
}

// Poll intervals of members waiting for a round to end. A member that holds
// an assignment learns of a newer rebalance only by heartbeat (kfake, which
// does not hold the join for KIP-394 pending members, may go through several
// generations while members arrive); probing is the faster poll used right
// after a new member joins a stable group, so that the measurement is the
// coordinator's, not a heartbeat interval's.
const (
	waitPoll  = 10 * time.Millisecond
	probePoll = 2 * time.Millisecond
)

// converge runs the member until r ends. If joinFirst, it starts with a
// JoinGroup (sent is called as it goes out); otherwise it starts as a
// synced member probing with heartbeats for a rebalance.
func (m *member) converge(ctx context.Context, r *round, joinFirst bool, sent func(time.Time)) error {
	needJoin := joinFirst
	poll := probePoll
	first := !joinFirst // a probing member's first heartbeat goes out at once
	for {
		if needJoin {
			if err := m.joinSync(ctx, sent); err != nil {
				return err
			}
			sent = nil
			needJoin = false
			poll = waitPoll
			if m.poll > 0 {
				poll = m.poll
			}
			r.report(m.gen, time.Now())
		}
		if !first {
			t := time.NewTimer(poll)
			select {
			case <-r.done:
				t.Stop()
				return nil
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		first = false
		select {
		case <-r.done:
			return nil
		default:
		}
		code, err := m.heartbeat(ctx)
		if err != nil {
			return fmt.Errorf("member %d: Heartbeat: %w", m.idx, err)
		}
		switch code {
		case 0:
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			needJoin = true
		case kerr.UnknownMemberID.Code:
			m.id, needJoin = "", true
		default:
			return fmt.Errorf("member %d: Heartbeat: %w", m.idx, kerr.ErrorForCode(code))
		}
	}
}

// formGroup runs the first rebalance of ms (all pending with known ids)
// and returns its latency: from the last member's JoinGroup sent until
// every member holds its assignment, and how many generations it took.
func formGroup(ctx context.Context, ms []*member, timeout time.Duration) (time.Duration, int32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := newRound(len(ms))
	var (
		mu       sync.Mutex
		lastSent time.Time
	)
	sent := func(t time.Time) {
		mu.Lock()
		if t.After(lastSent) {
			lastSent = t
		}
		mu.Unlock()
	}
	start := make(chan struct{})
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = m.converge(ctx, r, true, sent)
		}()
	}
	close(start)
	wg.Wait()
	if err := firstError(errs); err != nil {
		return 0, 0, err
	}
	if err := checkSynced(ms, r.gen); err != nil {
		return 0, 0, err
	}
	return r.doneAt.Sub(lastSent), r.gen, nil
}

// rejoin measures the rebalance after newcomer (pending, id known) joins
// the stable group of ms: from its JoinGroup sent until all members,
// newcomer included, hold assignments of one generation. The existing
// members learn of the rebalance by heartbeat (probing at once, then every
// probePoll).
func rejoin(ctx context.Context, ms []*member, newcomer *member, timeout time.Duration) (time.Duration, int32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	all := append(append([]*member(nil), ms...), newcomer)
	r := newRound(len(all))
	before := ms[0].gen
	var t0 time.Time
	sentCh := make(chan struct{})
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[len(ms)] = newcomer.converge(ctx, r, true, func(t time.Time) { t0 = t; close(sentCh) })
	}()
	<-sentCh
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.converge(ctx, r, false, nil)
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return 0, 0, err
	}
	if err := checkSynced(all, r.gen); err != nil {
		return 0, 0, err
	}
	return r.doneAt.Sub(t0), r.gen - before, nil
}

// checkSynced is the round's sanity check: everyone holds a non-empty
// assignment of generation gen, and the assignments are distinct.
func checkSynced(ms []*member, gen int32) error {
	seen := make(map[string]int, len(ms))
	for _, m := range ms {
		if m.gen != gen || len(m.assignment) == 0 {
			return fmt.Errorf("member %d: generation %d assignment %d bytes, want generation %d", m.idx, m.gen, len(m.assignment), gen)
		}
		if j, dup := seen[string(m.assignment)]; dup {
			return fmt.Errorf("members %d and %d got the same assignment", j, m.idx)
		}
		seen[string(m.assignment)] = m.idx
	}
	return nil
}

// leaveAll removes ms from their group with one batched LeaveGroup (v3+)
// and deletes the group: best effort cleanup so a long-running target is
// not left with the benchmark's groups. It runs even when ctx is done (an
// interrupted run cleans up too), bounded by its own timeout.
func leaveAll(ctx context.Context, ms []*member) {
	if len(ms) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Group = ms[0].group
	for _, m := range ms {
		if m.id != "" {
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = m.id
			l.Members = append(l.Members, lm)
		}
	}
	l.RequestWith(ctx, ms[0].cl)
	deleteGroups(ctx, ms[0].cl, ms[0].group)
}

func deleteGroups(ctx context.Context, cl *kgo.Client, groups ...string) {
	d := kmsg.NewPtrDeleteGroupsRequest()
	d.Groups = groups
	cl.RequestSharded(ctx, d)
}
