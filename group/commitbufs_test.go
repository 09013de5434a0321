package group

import (
	"bytes"
	"fmt"
	"math/rand/v2"
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

// A multi-partition commit's record buffers are reused by later commits
// once its write is done, never while it is in flight: the records handed
// to the store stay intact until WriteDone, and every commit, through a
// failed write and a reload, reads back what it committed.
func TestMultiPartitionCommitBuffersReused(t *testing.T) {
	const n = 20
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

// The commit's path allocates neither its typed nor its encoded records
// once a commit has finished before it (the response and the call remain).
func TestMultiPartitionCommitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	s := NewShard(Defaults(), seededReader{rand.NewChaCha8([32]byte{3})})
	now := newH(t).now
	var out Output
	var next Ticket
	var base int64
	reqs := make([]*kmsg.OffsetCommitRequest, 8)
	for i := range reqs {
		reqs[i] = wideCommit(fmt.Sprint("g", i), 50, 0)
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
	run() // the groups exist, the buffers are there
	allocs := testing.AllocsPerRun(20, run) / float64(len(reqs))
	// The call, the response's topics and partitions: 3. Allocating the
	// records again would add their three slices.
	if allocs > 4 {
		t.Fatalf("%.1f allocations per 50-partition commit, want at most 4", allocs)
	}
}
