package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadInOrder returns a shard loaded from store with its keys in the given
// order (the store's own order is by key; Load accepts any), and what its
// load wrote, applied to a copy of store.
func loadInOrder(t *testing.T, cfg Config, store map[string][]byte, keys []string, now time.Time) (*Shard, map[string][]byte) {
	t.Helper()
	s := NewShard(cfg, nil)
	for _, k := range keys {
		if err := s.Load([]byte(k), store[k]); err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	var out Output
	s.FinishLoad(now, &out)
	after := map[string][]byte{}
	for k, v := range store {
		after[k] = v
	}
	for len(out.Writes) > 0 {
		ws := out.Writes
		out = Output{}
		for _, w := range ws {
			storeRecords(after, w.Records)
			s.WriteDone(now, w.ID, ErrNone, &out)
		}
	}
	return s, after
}

// An empty consumer group turned classic by a JoinGroup while the write
// that removed its last member was in flight; that write failed, the
// conversion's was stored. The store then holds the classic group's
// record, and the last member's consumer records without the consumer
// group's own record, which the conversion tombstoned. Loaded in any
// order, the group is the classic group the store says it is, and the
// load tombstones the leftover consumer records.
func TestLoadDropsConsumerRecordsOfAGroupWithoutItsConsumerRecord(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 2})
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	h.hold = true
	h.advance(48 * time.Second) // m0's session ends: the group is empty
	if len(h.held) != 1 {
		t.Fatalf("setup: %d writes held, want m0's removal", len(h.held))
	}
	tk := h.join("g", jo{v: 3, session: 6000, rebalance: 10000, ptype: "connect", protos: protos("range", "x")})
	h.advance(time.Second)
	if g := h.s.Group("g"); g == nil || g.cg != nil || g.protocolType != "connect" {
		t.Fatal("setup: the group did not turn classic")
	}
	jr := h.joinResp(tk)
	pt, p := "connect", "range"
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Version, sreq.Group, sreq.MemberID, sreq.Generation = 5, "g", jr.MemberID, jr.Generation
	sreq.ProtocolType, sreq.Protocol = &pt, &p
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("x")}}
	h.do(func(t Ticket, out *Output) { h.s.SyncGroup(h.now, t, sreq, out) })
	h.completeHeld(0, ErrCoordinatorNotAvailable) // m0's removal is not stored
	h.held = h.held[1:]
	h.release() // the conversion's tombstones and the classic group's record are
	if _, ok := h.store[string(groupKey("g"))]; !ok {
		t.Fatal("setup: the classic group's record is not stored")
	}
	var keys []string
	for k := range h.store {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, order := range []string{"by key", "reversed"} {
		if order == "reversed" {
			slices.Reverse(keys)
		}
		s, after := loadInOrder(t, h.s.cfg, h.store, keys, h.now)
		g := s.Group("g")
		if g == nil || g.cg != nil || g.protocolType != "connect" {
			desc := "none"
			if g != nil {
				desc = "consumer-protocol state " + map[bool]string{true: "kept", false: "dropped"}[g.cg != nil] + ", protocol type " + g.protocolType
			}
			t.Errorf("loaded %s: group %s, want the classic group of protocol type connect", order, desc)
		}
		for k := range after {
			if k[0] >= keyCGroup && k[0] <= keyCCurrent {
				t.Errorf("loaded %s: consumer record %x still stored after the load", order, k)
			}
		}
	}
}
