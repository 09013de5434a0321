package server

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDecodeFrameHeader checks the request header as decodeFrame reads it
// against frames kmsg writes (client id null, empty and set), the reuse of
// the previous request's client id string, and truncated headers.
func TestDecodeFrameHeader(t *testing.T) {
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4)
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 7
	frame := func(clientID *string) []byte {
		var f *kmsg.RequestFormatter
		if clientID == nil {
			f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(""))
			b := f.AppendRequest(nil, hb, 9)
			// A null client id: length -1 and no bytes.
			b = append(b[:4+8], append([]byte{0xff, 0xff}, b[4+10:]...)...)
			return b[4:]
		}
		f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
		return f.AppendRequest(nil, hb, 9)[4:]
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		clientID *string
		want     string
	}{{"null", nil, ""}, {"empty", str(""), ""}, {"set", str("client-1"), "client-1"}} {
		r, err := decodeFrame(frame(tc.clientID), "")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, ok := r.req.(*kmsg.HeartbeatRequest)
		if !ok || r.key != hb.Key() || r.version != 4 || r.corr != 9 || r.clientID != tc.want ||
			got.Group != "g" || got.MemberID != "m" || got.Generation != 7 {
			t.Fatalf("%s: decoded key %d v%d corr %d client %q req %+v", tc.name, r.key, r.version, r.corr, r.clientID, r.req)
		}
	}

	prev := string([]byte("client-1")) // a string of its own
	r, err := decodeFrame(frame(str("client-1")), prev)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(r.clientID) != unsafe.StringData(prev) {
		t.Error("an unchanged client id was allocated again")
	}
	if r, err = decodeFrame(frame(str("client-2")), prev); err != nil || r.clientID != "client-2" {
		t.Errorf("a changed client id: %q, %v", r.clientID, err)
	}

	full := frame(str("client-1"))
	for n := range 10 + len("client-1") {
		if _, err := decodeFrame(full[:n], ""); !errors.Is(err, errTruncatedHeader) {
			t.Errorf("header cut at %d bytes: %v, want a truncated header", n, err)
		}
	}
}

// TestSkipTagsMatchesKmsg compares skipTags with kmsg.SkipTags on tag
// sections written field by field and on random bytes.
func TestSkipTagsMatchesKmsg(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		rd := kbin.Reader{Src: b}
		kmsg.SkipTags(&rd)
		rest, ok := skipTags(b)
		if ok != rd.Ok() || (ok && len(rest) != len(rd.Src)) {
			t.Fatalf("%x: skipTags %v with %d bytes left, kmsg %v with %d", b, ok, len(rest), rd.Ok(), len(rd.Src))
		}
	}
	var w []byte
	w = binary.AppendUvarint(w, 2)
	w = binary.AppendUvarint(w, 0)
	w = binary.AppendUvarint(w, 3)
	w = append(w, 1, 2, 3)
	w = binary.AppendUvarint(w, 300)
	w = binary.AppendUvarint(w, 200)
	w = append(w, make([]byte, 200)...)
	w = append(w, 0xaa, 0xbb) // the body after the header
	if rest, ok := skipTags(w); !ok || len(rest) != 2 {
		t.Fatalf("two tags: %v, %d bytes left", ok, len(rest))
	}
	for n := range len(w) {
		check(w[:n])
	}
	check([]byte{0})
	check(nil)
	rng := rand.New(rand.NewSource(1))
	for range 20000 {
		b := make([]byte, rng.Intn(12))
		rng.Read(b)
		if len(b) > 0 && rng.Intn(2) == 0 {
			b[0] %= 4 // a plausible count
		}
		check(b)
	}
}

// TestDecodeIntoSpareRequest: a commit or heartbeat decoded into the
// connection's spare request reuses it (and its topics array) and keeps
// nothing of the previous request, even a field the new version does not
// carry (a v8 commit's instance id under a v6 commit); a spare of another
// kind is not used.
func TestDecodeIntoSpareRequest(t *testing.T) {
	frame := func(req kmsg.Request) []byte {
		return kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 1)[4:]
	}
	commit := func(v int16, instance *string, parts ...int32) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(v)
		req.Group, req.MemberID, req.Generation, req.InstanceID = "g", "m", 3, instance
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic = "t"
		for _, p := range parts {
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Partition, pp.Offset = p, int64(p)*10
			tp.Partitions = append(tp.Partitions, pp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{tp, tp}
		return req
	}
	inst := "instance-1"
	var r request
	if _, err := decodeFrameInto(&r, frame(commit(8, &inst, 1, 2)), "", nil); err != nil {
		t.Fatal(err)
	}
	spare := r.req.(*kmsg.OffsetCommitRequest)
	if spare.InstanceID == nil || *spare.InstanceID != inst {
		t.Fatalf("v8 commit decoded without its instance id: %+v", spare)
	}
	topics := &spare.Topics[0]

	if _, err := decodeFrameInto(&r, frame(commit(6, nil, 5)), "", spare); err != nil {
		t.Fatal(err)
	}
	got := r.req.(*kmsg.OffsetCommitRequest)
	if got != spare || &got.Topics[0] != topics {
		t.Error("the spare request (or its topics) was not reused")
	}
	if got.Version != 6 || got.InstanceID != nil || got.Group != "g" || got.Generation != 3 || len(got.Topics) != 2 ||
		len(got.Topics[1].Partitions) != 1 || got.Topics[1].Partitions[0].Partition != 5 || got.Topics[1].Partitions[0].Offset != 50 ||
		got.Topics[1].Partitions[0].LeaderEpoch != -1 {
		t.Fatalf("v6 commit decoded into the spare: %+v", got)
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4)
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 7
	if _, err := decodeFrameInto(&r, frame(hb), "", spare); err != nil {
		t.Fatal(err)
	}
	if h, ok := r.req.(*kmsg.HeartbeatRequest); !ok || h.Generation != 7 || h.Group != "g" {
		t.Fatalf("heartbeat with a commit as spare: %T %+v", r.req, r.req)
	}
	if got.Topics[1].Partitions[0].Offset != 50 {
		t.Error("a spare of another kind was written to")
	}
}
