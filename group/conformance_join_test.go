package group

// Conformance tests for JoinGroup admission and the join barrier (03–27)
// and KIP-394 pending members (28–32), numbered as in docs/group-semantics.md
// §tests; the rules are in its §join sections. Numbers 01 and 02 (loading,
// wrong coordinator) are coordinator concerns and live in package
// coordinator. The other numbered cases of this range are scenario files in
// testdata/ (see docs/group-semantics.md §scenarios); the ones here loop,
// sweep variants or reach into internal state.

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestC15_LastJoiningMembersAreKickedOutWhenRejoiningGroupWithMaxSize(t *testing.T) {
	h := newH(t)
	ids, _ := h.stableGroup("g", 5)
	h.s.cfg.MaxSize = 3 // limit lowered (as after a config change and load)
	// The leader rejoins: rebalance. Then the others rejoin in order.
	var ts []Ticket
	for _, id := range ids {
		ts = append(ts, h.join("g", jo{member: id}))
	}
	for i, tk := range ts {
		r := h.joinResp(tk)
		if i < 3 && r.ErrorCode != 0 || i >= 3 && r.ErrorCode != ErrGroupMaxSizeReached {
			t.Fatalf("member %d: code %d", i, r.ErrorCode)
		}
	}
	g := h.s.Group("g")
	if len(g.MemberIDs()) != 3 || g.State() != CompletingRebalance {
		t.Fatalf("members %v state %v", g.MemberIDs(), g.State())
	}
}

// Pending members (KIP-394)

// A member id is the client id, "-" and a UUID; with a client id near the
// protocol's longest string (32,767 bytes) the id is built from a prefix of
// it, cut at a character boundary, so that it still fits a response string.
func TestMemberIDOfALongClientIDFitsAProtocolString(t *testing.T) {
	h := newH(t)
	client := "a" + strings.Repeat("é", 0x7fff/2) // 32,767 bytes
	r := h.joinResp(h.join("g", jo{client: client, v: 4}))
	if r.ErrorCode != ErrMemberIDRequired {
		t.Fatalf("first join: code %d", r.ErrorCode)
	}
	id := r.MemberID
	if len(id) > 0x7fff || !utf8.ValidString(id) {
		t.Fatalf("member id of %d bytes, valid UTF-8 %v", len(id), utf8.ValidString(id))
	}
	prefix, _, _ := strings.Cut(id, "-")
	if want := client[:maxMemberIDPrefix-1]; prefix != want {
		t.Fatalf("member id prefix of %d bytes, want the client id's first %d", len(prefix), len(want))
	}
	if r := h.joinResp(h.join("g", jo{client: client, member: id, v: 4})); r.ErrorCode != 0 || r.MemberID != id {
		t.Fatalf("rejoin with the id: code %d, member id changed %v", r.ErrorCode, r.MemberID != id)
	}
}
