package group

// Conformance tests for SyncGroup (33–43, docs/group-semantics.md §sync) and
// for Heartbeat and sessions (44–50, §heartbeat and §timers), numbered as in
// its §tests. The other numbered cases of this range are scenario files in
// testdata/ (docs/group-semantics.md §scenarios).

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestC34_SyncDeadGroup(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	h.s.Group("g").state = Dead // as while the partition unloads
	h.wantCode(h.sync("g", ids[0], gen, nil), ErrCoordinatorNotAvailable)
}

func TestC38_SyncGroupProtocolTypeOrNameInconsistent(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	bad := "other"
	for _, mod := range []func(*kmsg.SyncGroupRequest){
		func(r *kmsg.SyncGroupRequest) { r.ProtocolType = &bad },
		func(r *kmsg.SyncGroupRequest) { r.Protocol = &bad },
		func(r *kmsg.SyncGroupRequest) { r.ProtocolType = nil }, // v5 requires both
	} {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.MemberID, req.Generation = 5, "g", ids[0], gen
		pt, p := "consumer", "range"
		req.ProtocolType, req.Protocol = &pt, &p
		mod(req)
		tk := h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, req, out) })
		h.wantCode(tk, ErrInconsistentProtocol)
	}
	// Absent fields (v4) or matching ones (v5) succeed.
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 4, "g", ids[0], gen
	tk := h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, req, out) })
	h.wantCode(tk, ErrNone)
	h.wantCode(h.sync("g", ids[0], gen, nil), ErrNone)
}

// Heartbeat / session

func TestC44_HeartbeatUnknownGroupDeadGroupEmptyGroupUnknownMember(t *testing.T) {
	h := newH(t)
	if c := h.heartbeat("nope", "m", 1); c != ErrUnknownMemberID {
		t.Fatal(c)
	}
	ids, gen := h.stableGroup("g", 1)
	if c := h.heartbeat("g", "other", gen); c != ErrUnknownMemberID {
		t.Fatal(c)
	}
	h.leave("g", lm(ids[0])) // now Empty
	if c := h.heartbeat("g", ids[0], gen); c != ErrUnknownMemberID {
		t.Fatal(c)
	}
	h.s.Group("g").state = Dead
	if c := h.heartbeat("g", ids[0], gen); c != ErrCoordinatorNotAvailable {
		t.Fatal(c)
	}
}
