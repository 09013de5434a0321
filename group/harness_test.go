package group

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// h drives a Shard on a fake clock: writes complete at once (into an
// in-memory map standing in for the store) unless held or failed.
type h struct {
	t     testing.TB
	s     *Shard
	now   time.Time
	tick  Ticket
	got   map[Ticket]kmsg.Response
	store map[string][]byte
	fail  int16
	hold  bool
	// session is the default session timeout (ms) of joins that set none.
	session int32
	held    []Write
	// staleMeta holds the groups whose last metadata write failed: their
	// stored image may lag their live state (Kafka only logs some of these
	// failures), so checkReload does not compare their membership.
	staleMeta map[string]bool
	// completed counts the writes completed (durable or failed), failed
	// those that failed.
	completed, failed int
	// passHistory: a write of history records only is stored, whatever
	// fail says, and the fuzz inputs that pick held writes by position
	// skip it (historyOffTwin): a node without history issues no such
	// write, so failing or counting it would shift which of the others
	// an input fails. It is still held and completed in order.
	passHistory bool
	// holdRegex keeps the shard's regex jobs in regexJobs; by default each
	// call's jobs are resolved and handed back right after it, as the
	// runtime does once their matching ends.
	holdRegex bool
	regexJobs []RegexJob
	// refuseOver, when positive, fails a write holding a record (key and
	// value) larger than that with COORDINATOR_NOT_AVAILABLE, as the etcd
	// store's write fails past etcd's request limit; refused counts them.
	refuseOver int
	refused    int
}

type seededReader struct{ r *rand.ChaCha8 }

func (s seededReader) Read(p []byte) (int, error) { return s.r.Read(p) }

func newH(t testing.TB, mod ...func(*Config)) *h {
	t.Helper()
	cfg := Defaults()
	cfg.InitialRebalanceDelay = 0
	// Targets computed on every change (Kafka's own rule before 4.3): the
	// conformance tests check the reconciliation one step at a time;
	// batching has its own tests and scenario (cg_assignment_batching.txt).
	cfg.ConsumerAssignmentDelayPerMember = 0
	for _, f := range mod {
		f(&cfg)
	}
	return &h{
		t:     t,
		s:     NewShard(cfg, seededReader{rand.NewChaCha8([32]byte{1})}),
		now:   time.UnixMilli(1_700_000_000_000),
		got:   make(map[Ticket]kmsg.Response),
		store: make(map[string][]byte),

		staleMeta: make(map[string]bool),
	}
}

func (h *h) do(fn func(t Ticket, out *Output)) Ticket {
	h.tick++
	t := h.tick
	var out Output
	fn(t, &out)
	h.settle(&out)
	h.regexJobs = append(h.regexJobs, h.s.TakeRegexJobs()...)
	if !h.holdRegex {
		h.resolveRegexes()
	}
	return t
}

// resolveRegexes runs the held regex jobs and hands their results back.
func (h *h) resolveRegexes() {
	for _, j := range h.regexJobs {
		h.s.RegexResolved(j.Resolve())
	}
	h.regexJobs = nil
}

func (h *h) settle(out *Output) {
	for len(out.Replies)+len(out.Writes) > 0 {
		for _, r := range out.Replies {
			if _, dup := h.got[r.Ticket]; dup {
				h.t.Fatalf("ticket %d answered twice", r.Ticket)
			}
			h.got[r.Ticket] = r.Resp
		}
		writes := out.Writes
		out = &Output{}
		for _, w := range writes {
			if h.hold {
				h.held = append(h.held, w)
				continue
			}
			h.complete(w, out)
		}
	}
	if d := linkCheck(h.s); d != "" {
		h.t.Fatalf("%s", d)
	}
}

// historyOnly reports whether w holds history records (kind 0x09) only.
func historyOnly(w Write) bool {
	for _, r := range w.Records {
		if len(r.Key) == 0 || r.Key[0] != keyHistory {
			return false
		}
	}
	return len(w.Records) > 0
}

// linkCheck checks the invariants that keep the links between classic
// rebalances whose assignment writes are in flight simple (historyrec.go,
// rbTracker), at every settle: the one being written is never linked to a
// next one yet (open); a write is waited on by a next assignment or an end
// (a later one, or a conversion), not both; a rebalance links the one
// before (prev) as in flight, which links it back, or as failed, with no
// next and no write in flight. It returns the first violation.
func linkCheck(s *Shard) string {
	var ts []*rbTracker
	for _, g := range s.groups {
		if w := g.rbWriting; w != nil && w.next != nil {
			return fmt.Sprintf("group %q: rbWriting has a next rebalance", g.id)
		}
		ts = append(ts, g.rb, g.rbWriting)
	}
	inFlight := map[*rbTracker]bool{}
	for _, w := range s.writes {
		ts = append(ts, w.rb)
		inFlight[w.rb] = true
	}
	for _, t := range ts {
		switch {
		case t == nil:
		case t.next != nil && t.ended != nil:
			return fmt.Sprintf("rebalance %d: both next and ended set", t.seq)
		case t.prev != nil && t.prev.next != t && t.prev.next != nil, t.prev != nil && (t.prev.next == t) != inFlight[t.prev]:
			return fmt.Sprintf("rebalance %d: prev neither in flight (links it back) nor failed (no next, no write)", t.seq)
		}
	}
	return ""
}

func (h *h) complete(w Write, out *Output) {
	h.completed++
	code := h.fail
	if h.passHistory && historyOnly(w) {
		code = ErrNone
	}
	for _, r := range w.Records {
		if h.refuseOver > 0 && len(r.Key)+len(r.Value) > h.refuseOver && code == ErrNone {
			code = ErrCoordinatorNotAvailable
			h.refused++
		}
	}
	for _, r := range w.Records {
		if len(r.Key) > 0 && r.Key[0] == keyGroup {
			h.staleMeta[string(r.Key[1:])] = code != ErrNone
		}
	}
	if code == ErrNone {
		storeRecords(h.store, w.Records)
	} else {
		h.failed++
	}
	h.s.WriteDone(h.now, w.ID, code, out)
}

// storeRecords applies durable records to an in-memory store (a nil
// value deletes the key). Like a real store it copies the values: the
// shard reuses a commit's record buffers once the write is done.
func storeRecords(store map[string][]byte, recs []Record) {
	for _, r := range recs {
		if r.Value == nil {
			delete(store, string(r.Key))
		} else {
			store[string(r.Key)] = bytes.Clone(r.Value)
		}
	}
}

// release completes held writes.
func (h *h) release() {
	h.hold = false
	held := h.held
	h.held = nil
	var out Output
	for _, w := range held {
		h.complete(w, &out)
	}
	h.settle(&out)
}

// advance moves the clock by d, firing each timer at its own deadline (as a
// real loop would) rather than all at the end.
func (h *h) advance(d time.Duration) {
	target := h.now.Add(d)
	for {
		at, ok := h.s.NextDeadline()
		if !ok || at.After(target) {
			break
		}
		if at.After(h.now) {
			h.now = at
		}
		var out Output
		h.s.Tick(h.now, &out)
		h.settle(&out)
	}
	h.now = target
}

func (h *h) answered(t Ticket) bool { _, ok := h.got[t]; return ok }

func (h *h) resp(t Ticket) kmsg.Response {
	h.t.Helper()
	r, ok := h.got[t]
	if !ok {
		h.t.Fatalf("request %d not answered", t)
	}
	return r
}

func (h *h) joinResp(t Ticket) *kmsg.JoinGroupResponse {
	h.t.Helper()
	return h.resp(t).(*kmsg.JoinGroupResponse)
}
func (h *h) syncResp(t Ticket) *kmsg.SyncGroupResponse {
	h.t.Helper()
	return h.resp(t).(*kmsg.SyncGroupResponse)
}

func (h *h) notAnswered(t Ticket) {
	h.t.Helper()
	if r, ok := h.got[t]; ok {
		h.t.Fatalf("request %d answered early: %+v", t, r)
	}
}

func (h *h) wantCode(t Ticket, want int16) {
	h.t.Helper()
	var got int16
	switch r := h.resp(t).(type) {
	case *kmsg.JoinGroupResponse:
		got = r.ErrorCode
	case *kmsg.SyncGroupResponse:
		got = r.ErrorCode
	case *kmsg.HeartbeatResponse:
		got = r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		got = r.ErrorCode
	case *kmsg.OffsetDeleteResponse:
		got = r.ErrorCode
	default:
		h.t.Fatalf("wantCode: unexpected %T", r)
	}
	if got != want {
		h.t.Fatalf("request %d: error %d, want %d (%+v)", t, got, want, h.got[t])
	}
}

// jo describes a JoinGroup.
type jo struct {
	member, instance, client string
	v                        int16
	session, rebalance       int32
	ptype                    string
	protos                   []kmsg.JoinGroupRequestProtocol
	noProtos                 bool
}

func protos(namesAndMeta ...string) []kmsg.JoinGroupRequestProtocol {
	var ps []kmsg.JoinGroupRequestProtocol
	for i := 0; i+1 < len(namesAndMeta); i += 2 {
		ps = append(ps, kmsg.JoinGroupRequestProtocol{Name: namesAndMeta[i], Metadata: []byte(namesAndMeta[i+1])})
	}
	return ps
}

func (h *h) join(group string, o jo) Ticket {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 9 // jo.v: 0 = latest, -1 = version 0
	if o.v > 0 {
		req.Version = o.v
	}
	if o.v == -1 {
		req.Version = 0
	}
	req.Group = group
	req.MemberID = o.member
	if o.instance != "" {
		req.InstanceID = &o.instance
	}
	req.SessionTimeoutMillis = 10_000
	if h.session != 0 {
		req.SessionTimeoutMillis = h.session
	}
	if o.session != 0 {
		req.SessionTimeoutMillis = o.session
	}
	req.RebalanceTimeoutMillis = 30_000
	if o.rebalance != 0 {
		req.RebalanceTimeoutMillis = o.rebalance
	}
	req.ProtocolType = "consumer"
	if o.ptype != "" {
		req.ProtocolType = o.ptype
	}
	req.Protocols = protos("range", "m")
	if o.protos != nil || o.noProtos {
		req.Protocols = o.protos
	}
	client := "cli"
	if o.client != "" {
		client = o.client
	}
	return h.do(func(t Ticket, out *Output) {
		h.s.JoinGroup(h.now, t, Client{ID: client, Host: "127.0.0.1"}, req, out)
	})
}

// newMember runs the KIP-394 round trip and returns the ticket of the
// parked (or answered) second JoinGroup.
func (h *h) newMember(group string, o jo) Ticket {
	h.t.Helper()
	t := h.join(group, o)
	r := h.joinResp(t)
	if r.ErrorCode != ErrMemberIDRequired {
		h.t.Fatalf("first join: error %d, want 79", r.ErrorCode)
	}
	o.member = r.MemberID
	return h.join(group, o)
}

// syncAllType is syncAll for a group of protocol type ptype (protocol
// "range"): the leader's SyncGroup carries every member's assignment.
func (h *h) syncAllType(group, ptype, leader string, ids []string, gen int32) {
	h.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, leader, gen
	p := "range"
	req.ProtocolType, req.Protocol = &ptype, &p
	for _, id := range ids {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte("a-" + id)})
	}
	tk := h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, req, out) })
	if c := h.syncResp(tk).ErrorCode; c != 0 {
		h.t.Fatalf("sync error %d", c)
	}
}

func (h *h) sync(group, member string, gen int32, assign map[string]string, inst ...string) Ticket {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, gen
	if len(inst) > 0 {
		req.InstanceID = &inst[0]
	}
	pt, p := "consumer", "range"
	req.ProtocolType, req.Protocol = &pt, &p
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(a)})
	}
	return h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, req, out) })
}

func (h *h) heartbeat(group, member string, gen int32, inst ...string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, member, gen
	if len(inst) > 0 {
		req.InstanceID = &inst[0]
	}
	t := h.do(func(t Ticket, out *Output) { h.s.Heartbeat(h.now, t, req, out) })
	return h.resp(t).(*kmsg.HeartbeatResponse).ErrorCode
}

func (h *h) leave(group string, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = 5
	req.Group = group
	req.Members = members
	t := h.do(func(t Ticket, out *Output) { h.s.LeaveGroup(h.now, t, req, out) })
	return h.resp(t).(*kmsg.LeaveGroupResponse)
}

func lm(member string, inst ...string) kmsg.LeaveGroupRequestMember {
	m := kmsg.LeaveGroupRequestMember{MemberID: member}
	if len(inst) > 0 {
		m.InstanceID = &inst[0]
	}
	return m
}

func (h *h) commit(group, member string, gen int32, v int16, offs map[string]int64, meta ...string) *kmsg.OffsetCommitResponse {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = v
	req.Group, req.MemberID, req.Generation = group, member, gen
	for tp, o := range offs {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = 0, o
		if len(meta) > 0 {
			p.Metadata = &meta[0]
		}
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = tp
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
	}
	tk := h.do(func(t Ticket, out *Output) { h.s.OffsetCommit(h.now, t, req, out) })
	return h.resp(tk).(*kmsg.OffsetCommitResponse)
}

func commitCodes(r *kmsg.OffsetCommitResponse) []int16 {
	var cs []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return cs
}

func (h *h) fetch(group string, topic string, p int32) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{p}}}
	r := h.s.OffsetFetch(req)
	pp := r.Topics[0].Partitions[0]
	return pp.Offset, pp.ErrorCode
}

// stableGroup forms a group of n dynamic members and syncs it; it returns
// the member ids (leader first) and the generation.
func (h *h) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	// A short initial delay lets all n members into the first generation;
	// each new arrival extends it (KIP-134), so step until all are answered.
	saved := h.s.cfg.InitialRebalanceDelay
	h.s.cfg.InitialRebalanceDelay = 100 * time.Millisecond
	var tickets []Ticket
	for i := 0; i < n; i++ {
		tickets = append(tickets, h.newMember(group, jo{}))
	}
	for i := 0; i < 1000 && !h.answered(tickets[0]); i++ {
		h.advance(100 * time.Millisecond)
	}
	h.s.cfg.InitialRebalanceDelay = saved
	var leader string
	var ids []string
	var gen int32
	for _, tk := range tickets {
		r := h.joinResp(tk)
		if r.ErrorCode != 0 {
			h.t.Fatalf("join: %d", r.ErrorCode)
		}
		leader, gen = r.LeaderID, r.Generation
		ids = append(ids, r.MemberID)
	}
	h.syncAll(group, leader, ids, gen)
	out := []string{leader}
	for _, id := range ids {
		if id != leader {
			out = append(out, id)
		}
	}
	return out, gen
}

func (h *h) syncAll(group, leader string, ids []string, gen int32) {
	h.t.Helper()
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var ts []Ticket
	for _, id := range ids {
		if id != leader {
			ts = append(ts, h.sync(group, id, gen, nil))
		}
	}
	ts = append(ts, h.sync(group, leader, gen, assign))
	for _, tk := range ts {
		if c := h.syncResp(tk).ErrorCode; c != 0 {
			h.t.Fatalf("sync error %d", c)
		}
	}
	if st := h.s.Group(group).State(); st != Stable {
		h.t.Fatalf("state %v after sync, want Stable", st)
	}
}

func commitReq(group, member string, gen int32) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.MemberID, req.Generation = group, member, gen
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset = 1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func (h *h) commitReq(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	tk := h.do(func(t Ticket, out *Output) { h.s.OffsetCommit(h.now, t, req, out) })
	return h.resp(tk).(*kmsg.OffsetCommitResponse)
}

// reload returns a new shard loaded from h's store, as a node restarting or
// taking over the partition would build it. What its load writes is left
// out: the shard serves only to be compared (see adopt).
func (h *h) reload() *Shard {
	h.t.Helper()
	var out Output
	return h.reloadInto(&out)
}

func (h *h) reloadInto(out *Output) *Shard {
	h.t.Helper()
	s := NewShard(h.s.cfg, seededReader{rand.NewChaCha8([32]byte{2})})
	for k, v := range h.store {
		if err := s.Load([]byte(k), v); err != nil {
			h.t.Fatalf("reload: %v", err)
		}
	}
	s.FinishLoad(h.now, out)
	return s
}

// adopt replaces h's shard by one loaded from the store, as the runtime
// does, and settles what the load writes.
func (h *h) adopt() {
	h.t.Helper()
	var out Output
	h.s = h.reloadInto(&out)
	h.settle(&out)
}

// checkReload compares the live shard's answers with those of a shard
// reloaded from the store, when no write is in flight: every group's
// committed offsets (OffsetFetch), and for groups at rest (Stable or Empty,
// whose last metadata write did not fail) their description (DescribeGroups
// v5, with cohort's generation and leader tag). A group in the middle of a
// rebalance is ahead of its stored image by design; its offsets still
// compare. It returns a description of the first difference, or "".
func (h *h) checkReload() string {
	if h.s.PendingWrites() > 0 || len(h.held) > 0 {
		return ""
	}
	re := h.reload()
	ids := h.s.GroupIDs()
	for _, id := range re.GroupIDs() {
		if h.s.Group(id) == nil {
			return fmt.Sprintf("group %q exists only after reload", id)
		}
	}
	for id := range h.s.hist { // the rebalance history (docs/history.md)
		// The same values: times in UTC, empty lists nil, live as reloaded.
		la, lb := h.s.History(id), re.History(id)
		if reflect.DeepEqual(la, lb) {
			continue
		}
		a, _ := json.Marshal(la)
		b, _ := json.Marshal(lb)
		if bytes.Equal(a, b) { // a zone, an empty list, a field JSON leaves out
			return fmt.Sprintf("group %q history differs after reload, not in JSON:\nlive     %#v\nreloaded %#v", id, la, lb)
		}
		return fmt.Sprintf("group %q history differs after reload:\nlive     %s\nreloaded %s", id, a, b)
	}
	for _, id := range ids {
		live := h.s.Group(id)
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = id
		f.Groups = append(f.Groups, rg)
		if a, b := h.s.OffsetFetch(f).AppendTo(nil), re.OffsetFetch(f).AppendTo(nil); !bytes.Equal(a, b) {
			return fmt.Sprintf("group %q offsets differ after reload:\nlive     %x\nreloaded %x", id, a, b)
		}
		if (live.state != Stable && live.state != Empty) || h.staleMeta[id] {
			continue
		}
		if _, stored := h.store[string(groupKey(id))]; live.state == Empty && !stored && live.generation == 0 && len(live.offsets) == 0 {
			// Nothing of it is stored. (The store, not live.persisted:
			// a classic record landing after the tombstone a conversion
			// applied at once sets persisted although the store holds
			// the tombstone; that only costs a redundant tombstone.)
			continue
		}
		a, b := h.s.DescribeGroup(id, 5, false), re.DescribeGroup(id, 5, false)
		encode := func(g kmsg.DescribeGroupsResponseGroup) []byte {
			r := kmsg.NewPtrDescribeGroupsResponse()
			r.Version, r.Groups = 5, []kmsg.DescribeGroupsResponseGroup{g}
			return r.AppendTo(nil)
		}
		if !bytes.Equal(encode(a), encode(b)) {
			return fmt.Sprintf("group %q described differently after reload:\nlive     %+v\nreloaded %+v", id, a, b)
		}
	}
	return ""
}
