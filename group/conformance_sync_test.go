package group

// Conformance tests for SyncGroup (33–43, docs/group-semantics.md §sync) and
// for Heartbeat and sessions (44–50, §heartbeat and §timers), numbered as in
// its §tests. The other numbered cases of this range are scenario files in
// testdata/ (docs/group-semantics.md §scenarios).

import "testing"

func TestC34_SyncDeadGroup(t *testing.T) {
	h := newH(t)
	ids, gen := h.stableGroup("g", 1)
	h.s.Group("g").state = Dead // as while the partition unloads
	h.wantCode(h.sync("g", ids[0], gen, nil), ErrCoordinatorNotAvailable)
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
