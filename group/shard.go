package group

import (
	"container/heap"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Ticket is the caller's handle for one request; replies carry it back.
type Ticket uint64

// Client describes the sender of a request (from the request header and the
// connection).
type Client struct {
	ID   string // client id
	Host string // remote address, as shown by DescribeGroups
	// Principal is the connection's authenticated principal ("User:alice"):
	// a consumer-protocol member's regex gives it only the topics this
	// principal may describe (Config.TopicAccess).
	Principal string
	// Describes, when set, is the server's check of whether this client
	// may describe a group: a ListGroups then answers and counts only the
	// groups it allows (nil: every group). It is called on the
	// partitions' goroutines, one partition at a time, and before the
	// request's other filters, so possibly for groups they leave out: it
	// must have no side effects.
	Describes func(group string) bool
}

// Reply is a response ready to be sent for the request identified by Ticket.
type Reply struct {
	Ticket Ticket
	Resp   kmsg.Response
}

// Record is one key/value to persist; a nil Value deletes the key. The
// encoding is this package's (see records.go).
type Record struct {
	Key   []byte
	Value []byte
}

// Write is a batch of records to make durable. When the runtime has appended
// it, it must call Shard.WriteDone with the same ID. The records (their
// slices and bytes) are the shard's again once WriteDone returns: it reuses
// them for later writes, so a runtime must not keep them (a store copies what
// it keeps).
type Write struct {
	ID      uint64
	Records []Record
}

// Output collects what a call produced. Callers reuse one Output per loop turn
// and reset it with Reset.
type Output struct {
	Replies []Reply
	Writes  []Write
}

// Reset empties o, keeping its capacity.
func (o *Output) Reset() {
	clear(o.Replies)
	o.Replies = o.Replies[:0]
	clear(o.Writes)
	o.Writes = o.Writes[:0]
}

func (o *Output) reply(t Ticket, r kmsg.Response) {
	o.Replies = append(o.Replies, Reply{Ticket: t, Resp: r})
}

// Shard is the set of groups of one coordinator partition, with their timers
// and in-flight writes. It is not safe for concurrent use: its caller makes
// one call at a time (the coordinator holds the partition's mutex).
type Shard struct {
	cfg    Config
	rand   io.Reader
	groups map[string]*Group
	// hist holds the rebalance history of groups (historyrec.go).
	hist map[string]*ghist

	timers   timerHeap
	timerSeq uint64

	nextWrite uint64
	writes    map[uint64]pendingWrite
	// ending counts, by group id, the applied writes in flight (or
	// failed) that tombstone one of the group's own records (cgending.go).
	ending map[string]ending
	// refusalLog bounds the lines about requests refused for a record
	// over the store's limit (recordRefusal).
	refusalLog minuteLog
	// pendingStaticLog bounds the lines about JoinGroups that name a
	// pending member id with an instance id (joinExisting).
	pendingStaticLog minuteLog
	// needsReload: see NeedsReload.
	needsReload bool
	// late holds, once the shard is unloaded, the writes then in flight
	// that hold rebalance events (historylate.go, LateWrites).
	late map[uint64]lateWrite
	// unloading is true while Unload gives up on the writes in flight.
	unloading bool
	// stormsAtLoad is true while FinishLoad evaluates the storm flags
	// (StormStatus.Loaded).
	stormsAtLoad bool
	// regexJobs: see TakeRegexJobs. nameBytes*: see nameBytes. lastRegex*:
	// see newRegexMatch.
	regexJobs        []RegexJob
	lastRegex        *regexMatch
	lastRegexExpr    string
	nameBytesN       int
	nameBytesVersion uint64
	nameBytesSet     bool
	// loading: see Load.
	loading loading
	// freeCommits and freeOne hold finished offset commits' calls (of
	// several partitions, of one) for the next ones (newOffsetCommitCall):
	// a 50-partition commit's records are 13 KB, and allocating, clearing
	// and scanning them was a sixth of the coordinator's CPU for the
	// commit; a one-partition commit's call was one 640-byte allocation.
	freeCommits []*offsetCommitCall
	freeRecs    int // records the calls of freeCommits can hold
	freeBuf     int // bytes their encoding buffers hold
	freeOne     []*oneOffsetCommit

	// Logf, when set, receives diagnostic messages (invariant violations
	// answered with an error instead of a panic, failed background writes).
	Logf func(format string, args ...any)
}

// NewShard returns an empty shard. rand supplies the randomness of member ids
// (crypto/rand.Reader in production, a seeded source in tests).
func NewShard(cfg Config, rand io.Reader) *Shard {
	return &Shard{
		cfg:    cfg.withDefaults(),
		rand:   rand,
		groups: make(map[string]*Group),
		hist:   make(map[string]*ghist),
		writes: make(map[uint64]pendingWrite),
	}
}

// Config returns the shard's effective configuration.
func (s *Shard) Config() Config { return s.cfg }

// Group returns the named group, or nil.
func (s *Shard) Group(id string) *Group { return s.groups[id] }

// GroupIDs returns the ids of all groups, sorted.
func (s *Shard) GroupIDs() []string {
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Len returns the number of groups.
func (s *Shard) Len() int { return len(s.groups) }

func (s *Shard) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// logWriteFailure logs a write that failed with code, for the writes whose
// failure nothing but the log hears of. The writes Unload gives up on are
// not logged: the store may well have taken them (a node stopping, a
// partition moving while they are in flight), and whoever loads the
// partition next reads whatever the store holds; calling them failed was a
// false alarm at every shutdown.
func (s *Shard) logWriteFailure(code int16, format string, args ...any) {
	if code == ErrNone || s.unloading {
		return
	}
	s.logf(format+": %s", append(args, codeText(code))...)
}

// codeText names a Kafka error code for a log line, with its number:
// "NOT_COORDINATOR (16)".
func codeText(code int16) string {
	name, _, _ := strings.Cut(kerr.ErrorForCode(code).Error(), ":")
	return fmt.Sprintf("%s (%d)", name, code)
}

// pendingWrite is a write the runtime has not reported yet: its records,
// replayed once it is durable, and what to do then (or on failure).
type pendingWrite struct {
	recs []rec
	done func(now time.Time, code int16, out *Output)
	// commit, instead of done, for an OffsetCommit (no closure to
	// allocate on that path).
	commit *offsetCommitCall
	// applied: the records were replayed when the write was issued
	// (consumer groups); a failure then asks for a reload.
	applied bool
	// endsGroup: the write tombstones this group's own record(s), as
	// ends says (counted in Shard.ending until it is durable).
	endsGroup string
	ends      ending
	// rb: the write completes the rebalance whose event it holds (a
	// classic group's assignment: writeEvents), told to OnRebalance once
	// it is durable, as an applied write's are. If the shard is unloaded
	// first, the late write keeps it for its outcome (historylate.go).
	rb *rbTracker
}

// write queues recs and registers done, called from WriteDone after the
// records were replayed (when durable) or not (when the write failed).
// (OffsetCommit registers its writes itself: see offsetCommitCall.)
func (s *Shard) write(out *Output, recs []rec, done func(now time.Time, code int16, out *Output)) {
	s.writeWith(out, nil, recs, done)
}

// writeWith is write with pre stored ahead of recs but not replayed (the
// tombstones a classic record carries: endingConsumer).
func (s *Shard) writeWith(out *Output, pre, recs []rec, done func(now time.Time, code int16, out *Output)) {
	enc := encodeWith(pre, recs)
	s.nextWrite++
	id := s.nextWrite
	s.writes[id] = pendingWrite{recs: recs, done: done}
	out.Writes = append(out.Writes, Write{ID: id, Records: enc})
}

// encodeWith returns the stored form of pre then recs.
func encodeWith(pre, recs []rec) []Record {
	enc := make([]Record, 0, len(pre)+len(recs))
	for i := range pre {
		enc = append(enc, pre[i].encode())
	}
	for i := range recs {
		if !recs[i].told { // an event of a node without history: not stored
			enc = append(enc, recs[i].encode())
		}
	}
	return enc
}

// writeEvents is write for records that hold the events of the rebalances
// the write completes: replayed once durable like any other, their events
// are then told to OnRebalance and counted by the storm detector
// (eventsDurable); a failed write's are neither. rb is the rebalance the
// write completes.
func (s *Shard) writeEvents(out *Output, pre, recs []rec, rb *rbTracker, done func(now time.Time, code int16, out *Output)) {
	s.writeWith(out, pre, recs, done)
	w := s.writes[s.nextWrite]
	w.rb = rb
	s.writes[s.nextWrite] = w
}

// WriteDone reports the outcome of the Write with the given id: code is
// ErrNone when it is durable, otherwise the Kafka error to give the clients
// that waited for it (NOT_COORDINATOR when this node lost the partition,
// COORDINATOR_NOT_AVAILABLE for a storage failure). A durable write's
// records are replayed onto the shard before the replies that waited for it
// are released.
func (s *Shard) WriteDone(now time.Time, id uint64, code int16, out *Output) {
	w, ok := s.writes[id]
	if !ok {
		if s.late != nil { // unloaded (historylate.go)
			s.lateWriteDone(now, id, code)
		}
		return
	}
	delete(s.writes, id)
	if w.endsGroup != "" && code == ErrNone {
		s.addEnding(w.endsGroup, ending{-w.ends.consumer, -w.ends.classic})
	}
	switch {
	case code != ErrNone && w.applied:
		// The shard already shows what this write failed to store:
		// only a reload from the store can take it back.
		s.needsReload = true
		s.tellHeld(w.recs)
	case code == ErrNone && !w.applied:
		for i := range w.recs {
			s.replay(&w.recs[i], false)
		}
		if w.rb != nil {
			s.eventsDurable(now, w.recs)
		}
	case code == ErrNone:
		s.eventsDurable(now, w.recs)
		s.tellHeld(w.recs)
	}
	switch {
	case w.commit != nil:
		w.commit.written(code, out)
		s.recycleCommit(w.commit)
	case w.done != nil:
		w.done(now, code, out)
	}
}

// writeApplied queues records the shard has already replayed (consumer
// groups change this way, see consumer.go); done is called from WriteDone.
func (s *Shard) writeApplied(out *Output, recs []rec, done func(now time.Time, code int16, out *Output)) {
	group, ends, pre := s.noteEnding(recs)
	enc := encodeWith(pre, recs)
	s.nextWrite++
	id := s.nextWrite
	s.writes[id] = pendingWrite{recs: recs, done: done, applied: true, endsGroup: group, ends: ends}
	s.eventsUnstored(recs)
	out.Writes = append(out.Writes, Write{ID: id, Records: enc})
}

// NeedsReload reports that a write whose records the shard had already
// applied failed: the shard's state is ahead of the store, and the runtime
// must reload the partition from the store (once its writes in flight are
// done) before serving it further.
func (s *Shard) NeedsReload() bool { return s.needsReload }

// PendingWrites reports how many writes await WriteDone.
func (s *Shard) PendingWrites() int { return len(s.writes) }

// NextDeadline returns when Tick must next be called, if any timer is armed.
func (s *Shard) NextDeadline() (time.Time, bool) {
	if len(s.timers) == 0 {
		return time.Time{}, false
	}
	return s.timers[0].at, true
}

// Tick fires every timer due at now, in deadline order.
func (s *Shard) Tick(now time.Time, out *Output) {
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		t := heap.Pop(&s.timers).(*timer)
		t.fire(now, out)
	}
}

// Unload answers every parked request with NOT_COORDINATOR, cancels all
// timers and forgets all groups (the partition moved away or the node is
// stopping). The replies waiting for writes in flight are answered
// NOT_COORDINATOR as well, in write order; a later WriteDone for one of those
// writes does nothing, except for the rebalances it holds (LateWrites).
func (s *Shard) Unload(now time.Time, out *Output) {
	for _, id := range s.GroupIDs() {
		g := s.groups[id]
		for _, m := range g.members {
			if m.join != nil {
				out.reply(m.join.t, joinError(m.join.v, ErrNotCoordinator, m.id))
				m.join = nil
			}
			if m.sync != nil {
				out.reply(m.sync.t, syncError(m.sync.v, ErrNotCoordinator))
				m.sync = nil
			}
		}
		g.state = Dead
	}
	for len(s.timers) > 0 {
		heap.Pop(&s.timers)
	}
	ids := make([]uint64, 0, len(s.writes))
	for id := range s.writes {
		ids = append(ids, id)
	}
	slices.Sort(ids) // answer in write order, deterministically
	keep := s.keepLate(ids)
	s.unloading = true
	defer func() { s.unloading = false }()
	for _, id := range ids {
		w := s.writes[id]
		delete(s.writes, id)
		switch {
		case w.commit != nil:
			w.commit.written(ErrNotCoordinator, out)
		case w.done != nil:
			w.done(now, ErrNotCoordinator, out)
		}
	}
	s.groups = make(map[string]*Group)
	s.ending = nil
	s.hist = keep
	if s.hist == nil {
		s.hist = make(map[string]*ghist)
	}
}

// timer is one armed deadline. Timers are owned by groups and members and
// re-armed in place (no garbage per heartbeat).
type timer struct {
	at   time.Time
	seq  uint64 // arm order: ties fire in the order they were armed
	idx  int    // index in the heap, -1 when not armed
	fire func(now time.Time, out *Output)
}

func newTimer(fire func(time.Time, *Output)) *timer { return &timer{idx: -1, fire: fire} }

func (s *Shard) arm(t *timer, at time.Time) {
	s.timerSeq++
	t.at, t.seq = at, s.timerSeq
	if t.idx >= 0 {
		heap.Fix(&s.timers, t.idx)
		return
	}
	heap.Push(&s.timers, t)
}

func (s *Shard) cancel(t *timer) {
	if t != nil && t.idx >= 0 {
		heap.Remove(&s.timers, t.idx)
	}
}

func (t *timer) armed() bool { return t != nil && t.idx >= 0 }

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.idx = -1
	*h = old[:n-1]
	return t
}

// maxMemberIDPrefix keeps a generated member id within the protocol's
// longest string (32,767 bytes): the prefix, "-" and a 36-character UUID.
const maxMemberIDPrefix = 0x7fff - 37

// newMemberID returns prefix + "-" + a random UUIDv4, like Kafka. A prefix
// (a client or instance id) too long for the id to fit a protocol string is
// cut, at a UTF-8 character boundary, to maxMemberIDPrefix bytes: Kafka would
// fail to write such an id in its response; cohort serves the member with a
// shorter one (member ids are opaque to clients).
func (s *Shard) newMemberID(prefix string) string {
	if len(prefix) > maxMemberIDPrefix {
		cut := maxMemberIDPrefix
		for cut > 0 && !utf8.RuneStart(prefix[cut]) {
			cut--
		}
		prefix = prefix[:cut]
	}
	var b [16]byte
	if _, err := io.ReadFull(s.rand, b[:]); err != nil {
		// A broken random source is a programming error in the caller;
		// fall back to a counter so ids stay unique.
		s.nextWrite++
		return fmt.Sprintf("%s-%016x", prefix, s.nextWrite)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%08x-%04x-%04x-%04x-%012x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
