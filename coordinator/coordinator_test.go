package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store"
	"github.com/cohort-dev/cohort/store/memstore"
)

type seeded struct{ r *rand.ChaCha8 }

func (s seeded) Read(p []byte) (int, error) { return s.r.Read(p) }

// gateStore wraps memstore: Load of a partition can be held, and Appends can
// be held (to observe that replies wait for durability) and counted.
type gateStore struct {
	*memstore.Store
	mu         sync.Mutex
	loadGate   map[int32]chan struct{}
	appendGate chan struct{}
	onMulti    func([]store.PartitionRecords)
	appends    atomic.Int64
	held       atomic.Int64 // partitions in a write held at the gate
	records    atomic.Int64
}

// holdAppends makes st's appends wait at the gate until release is called
// (again: no effect).
func holdAppends(st *gateStore) (release func()) {
	gate := make(chan struct{})
	st.mu.Lock()
	st.appendGate = gate
	st.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			st.mu.Lock()
			st.appendGate = nil
			st.mu.Unlock()
			close(gate)
		})
	}
}

func newGateStore() *gateStore {
	return &gateStore{Store: memstore.New(), loadGate: map[int32]chan struct{}{}}
}

func (g *gateStore) Load(ctx context.Context, p int32, fn func(store.Record) error) error {
	g.mu.Lock()
	gate := g.loadGate[p]
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return g.Store.Load(ctx, p, fn)
}

func (g *gateStore) Append(ctx context.Context, p int32, recs []store.Record) error {
	g.mu.Lock()
	gate := g.appendGate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	g.appends.Add(1)
	g.records.Add(int64(len(recs)))
	return g.Store.Append(ctx, p, recs)
}

func (g *gateStore) AppendMulti(ctx context.Context, batches []store.PartitionRecords) error {
	g.mu.Lock()
	gate := g.appendGate
	g.mu.Unlock()
	if gate != nil {
		g.held.Store(int64(len(batches)))
		<-gate
	}
	g.appends.Add(1)
	for _, b := range batches {
		g.records.Add(int64(len(b.Records)))
	}
	g.mu.Lock()
	onMulti := g.onMulti
	g.mu.Unlock()
	if onMulti != nil {
		onMulti(batches)
	}
	return g.Store.AppendMulti(ctx, batches)
}

type env struct {
	t     *testing.T
	c     *Coordinator
	st    *gateStore
	clk   *clock.Fake
	owned func(int32) bool
}

func newEnv(t *testing.T, st *gateStore, owned func(int32) bool) *env {
	t.Helper()
	return newEnvWith(t, st, owned, nil)
}

// newEnvWith is newEnv with the group configuration changed by mod (if not
// nil).
func newEnvWith(t *testing.T, st *gateStore, owned func(int32) bool, mod func(*group.Config)) *env {
	t.Helper()
	if st == nil {
		st = newGateStore()
	}
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	cfg := group.Defaults()
	cfg.InitialRebalanceDelay = 0
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(Config{Partitions: 8, Group: cfg, Store: st, Clock: clk, Rand: seeded{rand.NewChaCha8([32]byte{7})}, Owned: owned})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { c.Close() })
	return &env{t: t, c: c, st: st, clk: clk, owned: owned}
}

func (e *env) do(req kmsg.Request) kmsg.Response {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := e.c.Handle(ctx, group.Client{ID: "cli", Host: "127.0.0.1"}, req)
	if err != nil {
		e.t.Fatalf("%T: %v", req, err)
	}
	return r
}

func joinReq(groupID, member string, v int16) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = v
	r.Group, r.MemberID = groupID, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
	return r
}

// joinOne makes a 1-member stable group and returns member id and generation.
func (e *env) joinOne(groupID string) (string, int32) {
	e.t.Helper()
	r := e.do(joinReq(groupID, "", 9)).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != group.ErrMemberIDRequired {
		e.t.Fatalf("join: %d", r.ErrorCode)
	}
	r = e.do(joinReq(groupID, r.MemberID, 9)).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != 0 {
		e.t.Fatalf("join: %d", r.ErrorCode)
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.MemberID, s.Generation = 5, groupID, r.MemberID, r.Generation
	pt, p := "consumer", "range"
	s.ProtocolType, s.Protocol = &pt, &p
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte("A")}}
	sr := e.do(s).(*kmsg.SyncGroupResponse)
	if sr.ErrorCode != 0 || string(sr.MemberAssignment) != "A" {
		e.t.Fatalf("sync: %+v", sr)
	}
	return r.MemberID, r.Generation
}

func commitRequest(groupID, member string, gen int32, topic string, off int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.MemberID, r.Generation = groupID, member, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset = off
	t.Partitions = []kmsg.OffsetCommitRequestTopicPartition{p}
	r.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return r
}

func fetchReq(groupID, topic string) *kmsg.OffsetFetchRequest {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = groupID
	r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	return r
}

func (e *env) fetch(groupID, topic string) int64 {
	return e.do(fetchReq(groupID, topic)).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset
}

func TestPartitionForMatchesKafka(t *testing.T) {
	// Java: "".hashCode()=0, "a".hashCode()=97, "hello".hashCode()=99162322,
	// "polygenelubricants".hashCode()=Integer.MIN_VALUE (abs → 0).
	cases := map[string]int32{"": 0, "a": 97 % 50, "hello": 99162322 % 50, "polygenelubricants": 0}
	for id, want := range cases {
		if got := PartitionFor(id, 50); got != want {
			t.Errorf("%q: %d want %d", id, got, want)
		}
	}
	// Reference values computed independently (UTF-16 code units, 32-bit
	// wrap-around): "zzzzzzzz" → -1910022912 (abs), "😀" (a surrogate
	// pair) → 1772899.
	if got := PartitionFor("zzzzzzzz", 50); got != 1910022912%50 {
		t.Errorf("zzzzzzzz: %d", got)
	}
	if got := PartitionFor("😀", 1<<30); got != 1772899 {
		t.Errorf("surrogate pair: %d", got)
	}
}

func TestC01_RequestHandlingWhileLoadingInProgress(t *testing.T) {
	st := newGateStore()
	loading := PartitionFor("slow", 8)
	gate := make(chan struct{})
	st.loadGate[loading] = gate
	e := newEnv(t, st, nil)

	var other string
	for i := 0; ; i++ {
		other = string(rune('a' + i))
		if PartitionFor(other, 8) != loading {
			break
		}
	}
	<-e.c.parts[PartitionFor(other, 8)].loaded
	if _, gen := e.joinOne(other); gen != 1 { // other partitions unaffected
		t.Fatal(gen)
	}

	if r := e.do(joinReq("slow", "", 9)).(*kmsg.JoinGroupResponse); r.ErrorCode != group.ErrCoordinatorLoading {
		t.Fatalf("join %d", r.ErrorCode)
	}
	if r := e.do(commitRequest("slow", "", -1, "t", 1)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != group.ErrCoordinatorLoading {
		t.Fatal("commit")
	}
	if r := e.do(fetchReq("slow", "t")).(*kmsg.OffsetFetchResponse); r.ErrorCode != group.ErrCoordinatorLoading {
		t.Fatal("fetch")
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Group, s.MemberID, s.Generation = "slow", "m", 1
	if r := e.do(s).(*kmsg.SyncGroupResponse); r.ErrorCode != group.ErrRebalanceInProgress {
		t.Fatalf("sync %d", r.ErrorCode)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "slow", "m", 1
	if r := e.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != group.ErrNone {
		t.Fatalf("heartbeat %d", r.ErrorCode)
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"slow", other}
	dr := e.do(d).(*kmsg.DescribeGroupsResponse)
	if dr.Groups[0].ErrorCode != group.ErrCoordinatorLoading || dr.Groups[1].ErrorCode != 0 || dr.Groups[1].State != "Stable" {
		t.Fatalf("describe %+v", dr.Groups)
	}
	if r := e.do(kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse); r.ErrorCode != group.ErrCoordinatorLoading || len(r.Groups) != 1 {
		t.Fatalf("list %+v", r)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"slow"}
	if r := e.do(del).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != group.ErrCoordinatorLoading {
		t.Fatal("delete")
	}
	close(gate)
	if err := e.c.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := e.do(joinReq("slow", "", 9)).(*kmsg.JoinGroupResponse); r.ErrorCode != group.ErrMemberIDRequired {
		t.Fatalf("after load: %d", r.ErrorCode)
	}
}

func TestC02_JoinGroupWrongCoordinator(t *testing.T) {
	notOwned := PartitionFor("elsewhere", 8)
	e := newEnv(t, nil, func(p int32) bool { return p != notOwned })
	if r := e.do(joinReq("elsewhere", "", 9)).(*kmsg.JoinGroupResponse); r.ErrorCode != group.ErrNotCoordinator {
		t.Fatal(r.ErrorCode)
	}
	j := joinReq("elsewhere", "", 9)
	inst := "i"
	j.InstanceID = &inst
	if r := e.do(j).(*kmsg.JoinGroupResponse); r.ErrorCode != group.ErrNotCoordinator {
		t.Fatal(r.ErrorCode)
	}
}

func TestRepliesWaitForDurableWrites(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	release := holdAppends(st)
	defer release()
	done := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() { done <- e.do(commitRequest("g", "", -1, "t", 5)).(*kmsg.OffsetCommitResponse) }()
	// While the append is held, a heartbeat (no write) on the same
	// partition is answered: requests that write nothing are not slowed.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 1
	if r := e.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != group.ErrUnknownMemberID {
		t.Fatal(r.ErrorCode)
	}
	select {
	case <-done:
		t.Fatal("commit acknowledged before the write was durable")
	default:
	}
	release()
	if r := <-done; r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	if e.fetch("g", "t") != 5 {
		t.Fatal("offset")
	}
}

// An OffsetFetch with RequireStable of a group whose commit is being written
// waits for that write, through the store, and answers the committed value
// (Kafka 4.x); it was answered UNSTABLE_OFFSET_COMMIT at once.
func TestStableFetchWaitsForCommitInFlight(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	release := holdAppends(st)
	defer release() // also when the test fails: the env's cleanup waits for the write
	committed := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() { committed <- e.do(commitRequest("g", "", -1, "t", 5)).(*kmsg.OffsetCommitResponse) }()
	for st.held.Load() == 0 {
		time.Sleep(time.Millisecond) // the commit's write is at the gate
	}
	fetched := make(chan *kmsg.OffsetFetchResponse, 1)
	go func() {
		r := fetchReq("g", "t")
		r.RequireStable = true
		fetched <- e.do(r).(*kmsg.OffsetFetchResponse)
	}()
	select {
	case r := <-fetched:
		t.Fatalf("stable fetch answered while the commit was being written: %+v", r.Topics)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if r := <-committed; r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	r := <-fetched
	if p := r.Topics[0].Partitions[0]; r.ErrorCode != 0 || p.ErrorCode != 0 || p.Offset != 5 {
		t.Fatalf("stable fetch: top %d, partition %+v; want offset 5", r.ErrorCode, p)
	}
}

func TestGroupCommitBatchesConcurrentWrites(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	gate := make(chan struct{})
	st.mu.Lock()
	st.appendGate = gate
	st.mu.Unlock()
	// One group → one partition: 1 append in flight, the rest queue.
	const n = 64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := e.do(commitRequest("g", "", -1, "t"+string(rune('A'+i%26))+string(rune('a'+i/26)), int64(i))).(*kmsg.OffsetCommitResponse)
			if r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Error(r.Topics[0].Partitions[0].ErrorCode)
			}
		}(i)
	}
	// Wait until all commits wait behind the held append.
	p := e.c.parts[PartitionFor("g", 8)]
	if !testwait.Until(10*time.Second, func() bool { return p.pending() >= n }) || p.pending() != n {
		t.Fatalf("%d commits waiting, want %d", p.pending(), n)
	}
	st.mu.Lock()
	st.appendGate = nil
	st.mu.Unlock()
	close(gate)
	wg.Wait()
	if a, r := st.appends.Load(), st.records.Load(); r != n || a >= n/4 {
		t.Fatalf("%d records in %d appends: group commit should batch", r, a)
	}
}

func TestSessionTimeoutDrivenByInjectedClock(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.c.WaitLoaded(context.Background())
	_, _ = e.joinOne("g")
	describe := func() string {
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{"g"}
		return e.do(d).(*kmsg.DescribeGroupsResponse).Groups[0].State
	}
	e.clk.Advance(9 * time.Second)
	if s := describe(); s != "Stable" {
		t.Fatal(s)
	}
	e.clk.Advance(2 * time.Second) // past the 10 s session
	// The loop processes the timer asynchronously; wait for it (bounded).
	var state string
	if !testwait.Until(5*time.Second, func() bool { state = describe(); return state == "Empty" }) {
		t.Fatalf("state %s: member not expired", state)
	}
}

func TestReleaseAnswersParkedAndAcquireReloads(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	member, gen := e.joinOne("g")
	if r := e.do(commitRequest("g", member, gen, "t", 9)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("commit")
	}
	// A second member parks in JoinGroup (leader has not rejoined).
	first := e.do(joinReq("g", "", 9)).(*kmsg.JoinGroupResponse)
	parked := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { parked <- e.do(joinReq("g", first.MemberID, 9)).(*kmsg.JoinGroupResponse) }()
	p := PartitionFor("g", 8)
	testwait.Until(5*time.Second, func() bool { return e.c.parts[p].pending() >= 1 })
	if got := e.c.parts[p].pending(); got != 1 {
		t.Fatalf("%d requests parked, want the join", got)
	}
	e.c.Release(p)
	if r := <-parked; r.ErrorCode != group.ErrNotCoordinator {
		t.Fatalf("parked join: %d", r.ErrorCode)
	}
	if r := e.do(fetchReq("g", "t")).(*kmsg.OffsetFetchResponse); r.ErrorCode != group.ErrNotCoordinator {
		t.Fatal("released partition still serving")
	}
	e.c.Acquire(p)
	var off int64 = -2
	testwait.Until(5*time.Second, func() bool {
		r := e.do(fetchReq("g", "t")).(*kmsg.OffsetFetchResponse)
		if r.ErrorCode == 0 {
			off = r.Topics[0].Partitions[0].Offset
		}
		return r.ErrorCode == 0
	})
	if off != 9 {
		t.Fatalf("offset after reload: %d", off)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", member, gen
	if r := e.do(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("member lost its generation across reload: %d", r.ErrorCode)
	}
}

func TestRestartKeepsGroupsAndOffsets(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	member, gen := e.joinOne("g")
	e.do(commitRequest("g", member, gen, "t", 77))
	e.c.Close()

	e2 := newEnv(t, st, nil)
	e2.c.WaitLoaded(context.Background())
	if e2.fetch("g", "t") != 77 {
		t.Fatal("offset lost")
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"g"}
	g := e2.do(d).(*kmsg.DescribeGroupsResponse).Groups[0]
	if g.State != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != member || string(g.Members[0].MemberAssignment) != "A" {
		t.Fatalf("%+v", g)
	}
}

func TestStoreFailureIsRetriableError(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	st.FailWith(store.ErrClosed)
	if r := e.do(commitRequest("g", "", -1, "t", 1)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != group.ErrCoordinatorNotAvailable {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	st.FailWith(store.ErrNotOwner)
	if r := e.do(commitRequest("g", "", -1, "t", 1)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != group.ErrNotCoordinator {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	st.FailWith(nil)
	if e.fetch("g", "t") != -1 {
		t.Fatal("failed commit visible")
	}
}

// TestGroupCommitAcrossPartitions: with a store that can append to several
// partitions at once, the batches of all partitions pending during a write
// go out together in the next one.
func TestGroupCommitAcrossPartitions(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	var widest atomic.Int64 // most partitions in one write
	st.mu.Lock()
	st.onMulti = func(b []store.PartitionRecords) {
		for {
			w := widest.Load()
			if int64(len(b)) <= w || widest.CompareAndSwap(w, int64(len(b))) {
				return
			}
		}
	}
	st.mu.Unlock()
	gate := make(chan struct{})
	st.mu.Lock()
	st.appendGate = gate
	st.mu.Unlock()
	const n = 64
	var wg sync.WaitGroup
	parts := map[int32]bool{}
	for i := 0; i < n; i++ {
		g := fmt.Sprintf("g%d", i)
		parts[PartitionFor(g, 8)] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do(commitRequest(g, "", -1, "t", 1)).(*kmsg.OffsetCommitResponse)
			if r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Error(r.Topics[0].Partitions[0].ErrorCode)
			}
		}()
	}
	// Wait (bounded) until every commit waits in its partition (its batch
	// handed to the committer, which is held in the first write, or queued
	// behind the partition's batches in flight).
	pending := func() int {
		n := 0
		for _, p := range e.c.parts {
			n += p.pending()
		}
		return n
	}
	testwait.Until(10*time.Second, func() bool { return pending() >= n })
	if got := pending(); got != n {
		t.Fatalf("%d of %d commits waiting in their partitions", got, n)
	}
	st.mu.Lock()
	st.appendGate = nil
	st.mu.Unlock()
	close(gate)
	wg.Wait()
	// Held behind the first write, the other partitions' batches must go out
	// together in the next one; one writer per partition would need at
	// least two writes per partition.
	a, r := st.appends.Load(), st.records.Load()
	if r != n || widest.Load() < int64(len(parts))-st.held.Load() || a >= int64(2*len(parts)) {
		t.Fatalf("%d records of %d partitions in %d writes, widest covering %d partitions", r, len(parts), a, widest.Load())
	}
}

// appendOnly hides MultiAppender: the coordinator falls back to one writer
// per partition.
type appendOnly struct{ *gateStore }

func (a appendOnly) AppendMulti() {} // shadows the promoted method with a different signature

func TestPerPartitionWriterWithoutMultiAppend(t *testing.T) {
	st := newGateStore()
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	c, err := New(Config{Partitions: 8, Group: group.Defaults(), Store: appendOnly{st}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if c.multi != nil {
		t.Fatal("store without AppendMulti treated as MultiAppender")
	}
	c.Start()
	defer c.Close()
	c.WaitLoaded(context.Background())
	e := &env{t: t, c: c, st: st, clk: clk}
	for i := 0; i < 20; i++ {
		g := fmt.Sprintf("g%d", i)
		if r := e.do(commitRequest(g, "", -1, "t", int64(i))).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
		}
		if e.fetch(g, "t") != int64(i) {
			t.Fatal("offset")
		}
	}
	if st.appends.Load() != 20 {
		t.Fatalf("%d appends", st.appends.Load())
	}
}

// The committer applies a partition's append result itself only when that
// keeps the partition's results in order: never while an earlier one waits
// for the partition's loop in p.results, nor while the partition is busy
// (its loop or a request holds it); otherwise at once.
func TestCommitterAppliesResultsInOrder(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.c.WaitLoaded(context.Background())
	p := e.c.parts[0]
	p.mu.Lock()
	p.inflight++ // one batch in flight, of no shard (its writes are not applied)
	stale := appendResult{gen: p.shardGen + 100}
	p.mu.Unlock()

	p.sent.Add(1) // an earlier result waits for the loop
	if p.tryAppendDone(stale) {
		t.Fatal("applied ahead of a result waiting in the loop's channel")
	}
	p.sent.Add(-1)

	p.mu.Lock()
	if p.tryAppendDone(stale) {
		t.Fatal("applied while the partition was held")
	}
	p.mu.Unlock()

	if !p.tryAppendDone(stale) {
		t.Fatal("not applied on a free partition with nothing waiting")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight != 0 {
		t.Fatalf("%d batches in flight after the result was applied, want 0", p.inflight)
	}
}

// A commit that finds the committer role free is written on its caller's
// goroutine (no hand-off to the committer and back); a caller runs at most
// inlineRounds rounds and then passes the role, with what is still queued,
// to the committer goroutine, and nothing queued is left behind.
func TestCommitterRoleInlineThenHandedOver(t *testing.T) {
	st := newGateStore()
	e := newEnv(t, st, nil)
	e.c.WaitLoaded(context.Background())
	queued := func() int {
		e.c.cmu.Lock()
		defer e.c.cmu.Unlock()
		return len(e.c.cqueue)
	}
	const more = inlineRounds + 2 // rounds during which another commit arrives
	var (
		mu    sync.Mutex
		where []string // per round: which goroutine wrote it
		wg    sync.WaitGroup
	)
	st.mu.Lock()
	st.onMulti = func([]store.PartitionRecords) {
		stack := string(debug.Stack())
		w := "elsewhere"
		switch {
		case strings.Contains(stack, "(*partition).call"):
			w = "caller"
		case strings.Contains(stack, "(*Coordinator).commitLoop"):
			w = "committer"
		}
		mu.Lock()
		where = append(where, w)
		i := len(where)
		mu.Unlock()
		if i > more {
			return
		}
		// Another commit arrives while this round is written and waits
		// for the next one.
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do(commitRequest(fmt.Sprintf("more-%d", i), "", -1, "t", int64(i))).(*kmsg.OffsetCommitResponse)
			if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
				t.Errorf("commit %d: error %d", i, c)
			}
		}()
		testwait.Until(10*time.Second, func() bool { return queued() > 0 })
	}
	st.mu.Unlock()

	if r := e.do(commitRequest("first", "", -1, "t", 7)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	want := []string{}
	for i := 0; i <= more; i++ {
		w := "committer"
		if i < inlineRounds {
			w = "caller"
		}
		want = append(want, w)
	}
	if !slices.Equal(where, want) {
		t.Fatalf("rounds written by %v, want %v", where, want)
	}
	for i := 1; i <= more; i++ {
		if got := e.fetch(fmt.Sprintf("more-%d", i), "t"); got != int64(i) {
			t.Fatalf("more-%d: offset %d, want %d", i, got, i)
		}
	}
	if e.fetch("first", "t") != 7 {
		t.Fatal("first commit lost")
	}
}

// A DeleteGroups naming a group twice deletes it and answers each entry:
// the first NONE. (The merge of the partitions' answers kept one answer per
// id, and both entries said GROUP_ID_NOT_FOUND.)
func TestDeleteGroupsDuplicateID(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.c.WaitLoaded(context.Background())
	if r := e.do(commitRequest("g", "", -1, "t", 1)).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g", "g"}
	r := e.do(del).(*kmsg.DeleteGroupsResponse)
	f := fetchReq("g", "t")
	off := e.do(f).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset
	if off != -1 || len(r.Groups) != 2 || r.Groups[0].ErrorCode != 0 || r.Groups[1].ErrorCode != group.ErrGroupIDNotFound {
		t.Errorf("answers %+v, offset after %d; want NONE then GROUP_ID_NOT_FOUND, and the group gone", r.Groups, off)
	}
}

// OffsetFetch v8+ answers each group entry with the partitions it asked for,
// also when two entries name the same group.
func TestOffsetFetchDuplicateGroupEntries(t *testing.T) {
	e := newEnv(t, nil, nil)
	e.c.WaitLoaded(context.Background())
	e.do(commitRequest("g", "", -1, "t", 1))
	e.do(commitRequest("g", "", -1, "u", 2))
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 8
	for _, topic := range []string{"t", "u"} {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}
		f.Groups = append(f.Groups, g)
	}
	r := e.do(f).(*kmsg.OffsetFetchResponse)
	if len(r.Groups) != 2 || r.Groups[0].Topics[0].Topic != "t" || r.Groups[1].Topics[0].Topic != "u" {
		t.Errorf("entries asking for t/0 then u/0 answered %+v", r.Groups)
	}
}

// An empty group id is INVALID_GROUP_ID for the APIs that need one before
// anything about the group's partition is looked at: not NOT_COORDINATOR on
// a partition this node does not serve, nor the loading answer while it
// loads (docs/group-semantics.md §gating; Kafka checks it first too).
func TestEmptyGroupIDBeforeOwnershipAndLoading(t *testing.T) {
	loading := newGateStore()
	loading.loadGate[PartitionFor("", 8)] = make(chan struct{}) // never opens
	envs := map[string]*env{
		"on an unowned partition": newEnv(t, nil, func(p int32) bool { return p != PartitionFor("", 8) }),
		"while loading":           newEnv(t, loading, nil),
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.MemberID, hb.Generation = "m", 1
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.MemberID, sync.Generation = "m", 1
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.MemberID = "m"
	code := map[string]func(*env) int16{
		"JoinGroup":  func(e *env) int16 { return e.do(joinReq("", "", 9)).(*kmsg.JoinGroupResponse).ErrorCode },
		"Heartbeat":  func(e *env) int16 { return e.do(hb).(*kmsg.HeartbeatResponse).ErrorCode },
		"SyncGroup":  func(e *env) int16 { return e.do(sync).(*kmsg.SyncGroupResponse).ErrorCode },
		"LeaveGroup": func(e *env) int16 { return e.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode },
	}
	for where, e := range envs {
		for api, f := range code {
			if c := f(e); c != group.ErrInvalidGroupID {
				t.Errorf("%s with group \"\" %s: %d, want 24", api, where, c)
			}
		}
	}
}

// A SyncGroup v5+ without protocol type or name is
// INCONSISTENT_GROUP_PROTOCOL before anything else, the loading answer and
// the group id check included, as Kafka checks it first of all.
func TestSyncV5NullProtocolBeforeGating(t *testing.T) {
	st := newGateStore()
	st.loadGate[PartitionFor("slow", 8)] = make(chan struct{}) // never opens
	e := newEnv(t, st, nil)
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 5
	s.Group, s.MemberID, s.Generation = "slow", "m", 1 // ProtocolType, Protocol: null
	if r := e.do(s).(*kmsg.SyncGroupResponse); r.ErrorCode != group.ErrInconsistentProtocol {
		t.Errorf("SyncGroup v5 without protocol fields while loading: %d, want 23", r.ErrorCode)
	}
	s2 := kmsg.NewPtrSyncGroupRequest()
	s2.Version = 5
	s2.MemberID, s2.Generation = "m", 1 // group "" too
	if r := e.do(s2).(*kmsg.SyncGroupResponse); r.ErrorCode != group.ErrInconsistentProtocol {
		t.Errorf("SyncGroup v5 without protocol fields, group \"\": %d, want 23", r.ErrorCode)
	}
}
