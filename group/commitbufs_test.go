package group

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wideCommit is an OffsetCommit (v9, simple group) of partitions 0..n-1 of
// topic "t", partition p at base+p.
func wideCommit(group string, n int, base int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	for p := range n {
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset = int32(p), base+int64(p)
		t.Partitions = append(t.Partitions, pp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return req
}

// snapshot copies a write's records (keys and values).
func snapshot(w Write) []Record {
	out := make([]Record, len(w.Records))
	for i, r := range w.Records {
		out[i] = Record{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
	}
	return out
}

func sameRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// A commit's call and record buffers are reused by later commits once its
// write is done, never while it is in flight: the records handed to the
// store stay intact until WriteDone, and every commit, through a failed
// write and a reload, reads back what it committed. For commits of one
// partition (their own path) and of several.
func TestCommitBuffersReused(t *testing.T) {
	for _, n := range []int{1, 20} {
		t.Run(fmt.Sprintf("partitions=%d", n), func(t *testing.T) { testCommitBuffersReused(t, n) })
	}
}

func testCommitBuffersReused(t *testing.T, n int) {
	h := newH(t)

	// Two commits in flight at once keep their own records.
	h.hold = true
	ta := h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, wideCommit("a", n, 100), out) })
	wa := snapshot(h.held[0])
	tb := h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, wideCommit("b", n, 200), out) })
	if len(h.held) != 2 {
		t.Fatalf("%d writes held, want 2", len(h.held))
	}
	if !sameRecords(snapshot(h.held[0]), wa) {
		t.Fatal("a commit in flight had its records changed by the next one")
	}
	if sameRecords(wa, snapshot(h.held[1])) {
		t.Fatal("two commits wrote the same records")
	}
	h.release()
	for _, tk := range []Ticket{ta, tb} {
		for _, c := range commitCodes(h.resp(tk).(*kmsg.OffsetCommitResponse)) {
			if c != ErrNone {
				t.Fatalf("commit %d: %v", tk, c)
			}
		}
	}

	check := func(group string, base int64) {
		t.Helper()
		for p := range n {
			if o, code := h.fetch(group, "t", int32(p)); code != ErrNone || o != base+int64(p) {
				t.Fatalf("%s partition %d: offset %d (error %d), want %d", group, p, o, code, base+int64(p))
			}
		}
	}
	check("a", 100)
	check("b", 200)

	// Commit after commit, each one's records as written are its own, and
	// a failed write (whose buffers are reused too) changes nothing.
	var prev []Record
	for i := range 6 {
		base := int64(1000 * (i + 1))
		h.fail = ErrNone
		if i == 3 {
			h.fail = ErrCoordinatorNotAvailable
		}
		var written []Record
		tk := h.tick + 1
		var out Output
		h.s.OffsetCommit(h.now, tk, wideCommit("a", n, base), &out)
		h.tick = tk
		if len(out.Writes) != 1 {
			t.Fatalf("commit %d: %d writes", i, len(out.Writes))
		}
		written = snapshot(out.Writes[0])
		if prev != nil && sameRecords(written, prev) {
			t.Fatalf("commit %d wrote the previous commit's records", i)
		}
		// The records are intact when the store gets them (after any
		// other work of the turn).
		h.s.OffsetCommit(h.now, 1_000_000+tk, wideCommit("c", n, base+7), &out) // another commit in the same turn
		if !sameRecords(snapshot(out.Writes[0]), written) {
			t.Fatalf("commit %d: its records changed before the write was done", i)
		}
		h.settle(&out)
		code := commitCodes(h.resp(tk).(*kmsg.OffsetCommitResponse))[0]
		if i == 3 {
			if code != ErrCoordinatorNotAvailable {
				t.Fatalf("failed write answered %d", code)
			}
			check("a", base-1000)
			continue
		}
		if code != ErrNone {
			t.Fatalf("commit %d answered %d", i, code)
		}
		check("a", base)
		check("c", base+7)
		if diff := h.checkReload(); diff != "" {
			t.Fatalf("commit %d: %s", i, diff)
		}
		prev = written
	}
}

// Once a commit has finished before it, a commit allocates only its
// response: not its call, nor its typed or encoded records.
func TestOffsetCommitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	// The response of 50 partitions: itself, its topics, their partitions.
	// Allocating the records again would add their three slices and the call.
	if a, _ := commitAllocs(t, 50); a > 4 {
		t.Fatalf("%.1f allocations per 50-partition commit, want at most 4", a)
	}
	// One partition: the response, in one allocation of 120 bytes (with
	// the call and its inline records it was one of 640).
	if a, bytes := commitAllocs(t, 1); a > 1 || bytes > 200 {
		t.Fatalf("%.1f allocations, %.0f bytes per 1-partition commit, want 1 of at most 200", a, bytes)
	}
}

// commitAllocs runs commits of n partitions, each answered at once, and
// returns the allocations and bytes allocated per commit.
func commitAllocs(t *testing.T, n int) (allocs, bytes float64) {
	s := NewShard(Defaults(), seededReader{rand.NewChaCha8([32]byte{3})})
	now := newH(t).now
	var out Output
	var next Ticket
	var base int64
	reqs := make([]*kmsg.OffsetCommitRequest, 8)
	for i := range reqs {
		reqs[i] = wideCommit(fmt.Sprint("g", i), n, 0)
	}
	run := func() {
		for _, req := range reqs {
			next++
			base++
			for j := range req.Topics[0].Partitions {
				req.Topics[0].Partitions[j].Offset = base
			}
			s.OffsetCommit(now, next, req, &out)
			for _, w := range out.Writes {
				s.WriteDone(now, w.ID, ErrNone, &out)
			}
			out.Reset()
		}
	}
	run() // the groups exist, the calls are there
	allocs = testing.AllocsPerRun(20, run) / float64(len(reqs))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const runs = 50
	for range runs {
		run()
	}
	runtime.ReadMemStats(&m1)
	return allocs, float64(m1.TotalAlloc-m0.TotalAlloc) / float64(runs*len(reqs))
}

// What a shard keeps of finished commits is bounded: many commits finishing
// at once (of one partition, of 50, of more than the budget) leave at most
// freeOneMax one-partition calls and calls holding at most freeRecsBudget
// records in all.
func TestRecycledCommitsBounded(t *testing.T) {
	h := newH(t)
	for _, n := range []int{1, 50, 300} {
		h.hold = true
		for i := range 20 {
			g := fmt.Sprintf("g%d-%d", n, i)
			h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, wideCommit(g, n, 1), out) })
		}
		h.release()
		recs := 0
		for _, c := range h.s.freeCommits {
			recs += cap(c.recs)
			if c.resp != nil || c.g != nil {
				t.Fatal("a kept call still refers to its response or group")
			}
		}
		if recs != h.s.freeRecs || recs > freeRecsBudget || len(h.s.freeOne) > freeOneMax {
			t.Fatalf("after commits of %d partitions: %d calls of %d records kept (counted %d, budget %d), %d one-partition calls (at most %d)",
				n, len(h.s.freeCommits), recs, h.s.freeRecs, freeRecsBudget, len(h.s.freeOne), freeOneMax)
		}
		if n == 1 && len(h.s.freeOne) != freeOneMax {
			t.Fatalf("%d one-partition calls kept, want %d", len(h.s.freeOne), freeOneMax)
		}
		if n == 50 && recs == 0 {
			t.Fatal("no 50-partition call kept")
		}
	}
}

// The finished commits a shard keeps for reuse are bounded in bytes as well
// as in records: commits of 30 partitions with the largest metadata a
// commit may carry (4 KB each) have 120 KB encoding buffers, and the record
// bound alone kept eight of them, a megabyte per shard and some 50 MB over a
// node's shards, where the kept calls are meant to hold about 80 KB.
func TestKeptCommitBuffersBoundedInBytes(t *testing.T) {
	h := newH(t)
	h.hold = true
	meta := string(bytes.Repeat([]byte{'m'}, 4000))
	for i := range 10 {
		req := wideCommit(fmt.Sprintf("g%d", i), 30, 100)
		for j := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[j].Metadata = &meta
		}
		h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, req, out) })
	}
	h.release()
	kept := 0
	for _, c := range h.s.freeCommits {
		kept += cap(c.buf)
	}
	if len(h.s.freeCommits) == 0 {
		t.Fatal("no commit kept for reuse at all")
	}
	if kept > freeBufBudget {
		t.Fatalf("the shard keeps %d commits holding %d bytes of buffers, want at most %d", len(h.s.freeCommits), kept, freeBufBudget)
	}
}
