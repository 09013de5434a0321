package group

import (
	"fmt"
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
	h := emptyConsumerGroupHeld(t)
	joinConnectGroup(t, h)
	h.completeHeld(0, ErrCoordinatorNotAvailable) // m0's removal is not stored
	h.held = h.held[1:]
	h.release() // the conversion's tombstones and the classic group's record are
	if _, ok := h.store[string(groupKey("g"))]; !ok {
		t.Fatal("setup: the classic group's record is not stored")
	}
	expectConnectGroupLoaded(t, h)
}

// An empty consumer group turned classic by a JoinGroup, with the
// writes held: the conversion's write (the tombstones of the consumer
// group's record) fails, and the classic group's record, written after
// it, is stored. Each write has its own outcome, so this is a store the
// partition can reload from (cgending.go). The classic group's record
// carries the conversion's tombstones: the store never holds both
// records of the group, and the load makes the classic group whatever
// the order it reads the records in. Before, it held both, and the group
// loaded classic or consumer depending on that order. m0's removal, held
// too, is stored or not.
func TestConversionLostClassicRecordStoredLoadsClassic(t *testing.T) {
	for _, removal := range []int16{ErrNone, ErrCoordinatorNotAvailable} {
		t.Run(map[bool]string{true: "removal stored", false: "removal failed"}[removal == ErrNone], func(t *testing.T) {
			h := emptyConsumerGroupHeld(t)
			joinConnectGroup(t, h)
			held := h.held
			h.held, h.hold = nil, false
			conversion := false
			for i, w := range held {
				code := ErrNone
				switch {
				case i == 0:
					code = removal
				case !conversion && len(w.Records) > 0 && w.Records[0].Key[0] == keyCTMeta && w.Records[0].Value == nil:
					conversion, code = true, ErrCoordinatorNotAvailable // the conversion's write is lost
				}
				h.completeHeld0(w, code)
			}
			if !conversion {
				t.Fatal("setup: no conversion write held")
			}
			if _, ok := h.store[string(groupKey("g"))]; !ok {
				t.Fatal("setup: the classic group's record is not stored")
			}
			if _, ok := h.store[string(cKey(keyCGroup, "g", ""))]; ok {
				t.Errorf("the store holds the consumer group's record next to the classic group's")
			}
			expectConnectGroupLoaded(t, h)
		})
	}
}

// The downgrade writes the classic group's record just before the
// heartbeat's write that tombstones the consumer group: when that write
// fails and the classic record is stored, the store must not hold both
// (cgending.go). The classic record carries the tombstones; with no
// conversion in flight a classic record is written alone.
func TestDowngradeLostTombstonesClassicRecordStoredAlone(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 6})
	h.mixedStable(t)
	h.cg(hb{member: "n1", epoch: -1})
	h.hold = true
	h.cgSend(hb{member: "n2", epoch: -1}) // the last consumer-protocol member leaves: downgrade
	if g := h.s.Group("cg"); g == nil || g.cg != nil {
		t.Fatal("setup: the group did not turn classic")
	}
	held := h.held
	h.held, h.hold = nil, false
	var classic, ending int
	for _, w := range held {
		code := ErrNone
		for _, r := range w.Records {
			switch {
			case r.Key[0] == keyGroup && r.Value != nil:
				classic++
			case r.Key[0] == keyCGroup && r.Value == nil && w.Records[0].Key[0] != keyCTMeta:
				ending++
				code = ErrCoordinatorNotAvailable // the heartbeat's write is lost
			}
		}
		h.completeHeld0(w, code)
	}
	if classic != 1 || ending != 1 {
		t.Fatalf("setup: %d classic records, %d writes ending the consumer group held; want 1 and 1", classic, ending)
	}
	_, cgRec := h.store[string(cKey(keyCGroup, "cg", ""))]
	_, clRec := h.store[string(groupKey("cg"))]
	if cgRec && clRec {
		t.Errorf("the store holds the consumer group's record next to the classic group's")
	}
	if !clRec {
		t.Errorf("the classic group's record is not stored")
	}
	// The runtime reloads the partition (a write it had applied failed);
	// with no conversion in flight the next classic record is written
	// alone.
	if !h.s.NeedsReload() {
		t.Fatal("setup: the failed write asks for no reload")
	}
	h.adopt()
	h.hold = true
	h.advance(time.Minute) // the classic members' sessions end: the group's record is written
	if len(h.held) == 0 {
		t.Fatal("setup: no write after the reload")
	}
	for _, w := range h.held {
		for _, r := range w.Records {
			if r.Key[0] == keyCGroup || r.Key[0] == keyCTMeta {
				t.Errorf("a classic write with no conversion in flight carries consumer record %x", r.Key)
			}
		}
	}
	h.release()
}

// joinConnectGroup has a classic member join group g (protocol type
// connect, JoinGroup v3) and sync; the group must have turned classic.
func joinConnectGroup(t *testing.T, h *h) {
	t.Helper()
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
}

// expectConnectGroupLoaded loads h's store with its keys in order and
// reversed: group g must load as the classic group of protocol type
// connect, and no consumer record stay stored after the load.
func expectConnectGroupLoaded(t *testing.T, h *h) {
	t.Helper()
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

// emptyConsumerGroupHeld returns a harness whose consumer group g lost
// its only member m0 to its session, with the write removing it held.
func emptyConsumerGroupHeld(t *testing.T) *h {
	t.Helper()
	h, _ := newCH(t, map[string]int32{"a": 2})
	expectCode(t, "cg join", h.cg(hb{group: "g", member: "m0", names: []string{"a"}, owned: tpset{}}).ErrorCode, ErrNone)
	h.hold = true
	h.advance(48 * time.Second) // m0's session ends: the group is empty
	if len(h.held) != 1 {
		t.Fatalf("setup: %d writes held, want m0's removal", len(h.held))
	}
	return h
}

// A classic group upgraded by a consumer-protocol member's join, with the
// writes held: the upgrade's write (the classic record's tombstone and the
// consumer group's records) fails, and a second member's join, written
// after it, is stored with the consumer group's next epoch. The second
// write carries the classic record's tombstone (cgending.go): the store
// never holds both records of the group, and the group loads the same
// whatever the order of the records. Before, the store held both, and the
// group loaded classic or consumer depending on that order.
func TestUpgradeLostConsumerRecordStoredAlone(t *testing.T) {
	h, _ := newCH(t, map[string]int32{"a": 6})
	h.classicStable()
	h.hold = true
	h.cgSend(hb{member: "n1", names: []string{"a"}, owned: tpset{}}) // upgrades the group
	h.cgSend(hb{member: "n2", names: []string{"a"}, owned: tpset{}})
	if len(h.held) != 2 {
		t.Fatalf("setup: %d writes held, want the two joins'", len(h.held))
	}
	held := h.held
	h.held, h.hold = nil, false
	if r := held[0].Records; !slices.ContainsFunc(r, func(r Record) bool { return r.Key[0] == keyGroup && r.Value == nil }) {
		t.Fatal("setup: the first write does not tombstone the classic record")
	}
	h.completeHeld0(held[0], ErrCoordinatorNotAvailable) // the upgrade is lost
	h.completeHeld0(held[1], ErrNone)
	_, cgRec := h.store[string(cKey(keyCGroup, "cg", ""))]
	_, clRec := h.store[string(groupKey("cg"))]
	if cgRec && clRec {
		t.Errorf("the store holds the consumer group's record next to the classic group's")
	}
	var keys []string
	for k := range h.store {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var first string
	for _, order := range []string{"by key", "reversed"} {
		if order == "reversed" {
			slices.Reverse(keys)
		}
		s, _ := loadInOrder(t, h.s.cfg, h.store, keys, h.now)
		desc := "none"
		if g := s.Group("cg"); g != nil && g.cg != nil {
			desc = fmt.Sprintf("consumer group of %d members", len(g.cg.members))
		} else if g != nil {
			desc = fmt.Sprintf("classic group of %d members", len(g.members))
		}
		if first == "" {
			first = desc
		} else if desc != first {
			t.Errorf("loaded by key: %s; loaded reversed: %s", first, desc)
		}
	}
}
