package group

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
)

// The history's times are in UTC whatever the zone of the node (docs/history.md):
// a live event is the same value as itself reloaded from the store, by this
// node or by one in another zone. These tests set time.Local (no test of the
// package runs in parallel).

// setZone sets time.Local to a zone of offset seconds east of UTC until the
// test ends.
func setZone(t *testing.T, name string, offset int) {
	t.Helper()
	saved := time.Local
	time.Local = time.FixedZone(name, offset)
	t.Cleanup(func() { time.Local = saved })
}

// eventTimes lists every time in ev.
func eventTimes(ev *RebalanceEvent) []time.Time {
	ts := []time.Time{ev.Start, ev.End}
	for _, c := range append([]Cause{ev.Cause}, ev.MoreCauses...) {
		ts = append(ts, c.At)
		if c.LastHeartbeat != nil {
			ts = append(ts, *c.LastHeartbeat)
		}
		if c.Rejoin != nil {
			ts = append(ts, c.Rejoin.At)
		}
	}
	return ts
}

// wantUTC fails when a time of evs is not in UTC.
func wantUTC(t *testing.T, what string, evs []RebalanceEvent) {
	t.Helper()
	for i := range evs {
		for _, tm := range eventTimes(&evs[i]) {
			if tm.Location() != time.UTC {
				js, _ := json.Marshal(evs[i])
				t.Fatalf("%s event %d: time %v in zone %q, want UTC: %s", what, evs[i].Seq, tm, tm.Location(), js)
			}
		}
	}
}

// zoneHistory records, with time.Local 5h30 east of UTC, a classic group's
// rebalances (a join, a leave, a session timeout) and a consumer group's
// first one, and returns the harness.
func zoneHistory(t *testing.T) *h {
	t.Helper()
	setZone(t, "X", 5*3600+1800)
	h, _ := newCH(t, map[string]int32{"t": 4})
	ids, _ := h.stableGroup("g", 3)
	h.leave("g", lm(ids[2]))
	h.advance(time.Second)
	gen := h.rejoinAndSync("g", ids[0], ids[1])
	for i := 0; i < 4; i++ { // ids[1] stops heartbeating: a session timeout
		h.advance(3 * time.Second)
		h.heartbeat("g", ids[0], gen)
	}
	h.rejoinAndSync("g", ids[0])
	h.events("g", 3)
	h.cgJoin("m0", "t")
	h.cgSettle("m0")
	if len(h.s.History("cg")) == 0 {
		t.Fatal("the consumer group recorded no event")
	}
	return h
}

// TestHistoryZoneReload: on a node whose zone is not UTC, the history is
// recorded in UTC, and reloaded (here, and on a node in another zone) it is
// the same value, down to MoreCauses left nil when empty.
func TestHistoryZoneReload(t *testing.T) {
	h := zoneHistory(t)
	for _, g := range []string{"g", "cg"} {
		live := h.s.History(g)
		wantUTC(t, "live", live)
		re := h.reload().History(g)
		if !reflect.DeepEqual(live, re) {
			a, _ := json.Marshal(live)
			b, _ := json.Marshal(re)
			t.Fatalf("group %q: history differs after reload:\nlive     %#v\nreloaded %#v\nlive JSON     %s\nreloaded JSON %s", g, live, re, a, b)
		}
		setZone(t, "Y", -3*3600) // a failover to a node three hours west of UTC
		if other := h.reload().History(g); !reflect.DeepEqual(live, other) {
			t.Fatalf("group %q: history differs after a reload in another zone:\nlive     %#v\nreloaded %#v", g, live, other)
		}
		setZone(t, "X", 5*3600+1800)
	}
}

// TestHistoryZoneWaiting: the "now" view of a rebalance in progress is in
// UTC too.
func TestHistoryZoneWaiting(t *testing.T) {
	setZone(t, "X", 5*3600+1800)
	h := newH(t)
	ids, _ := h.stableGroup("g", 2)
	h.join("g", jo{member: ids[0]}) // a rejoin: the group waits for ids[1]
	doc, ok := h.s.HistoryDoc("g", -1, h.now)
	if !ok || doc.Waiting == nil || len(doc.Waiting.Members) == 0 || doc.Waiting.Cause == nil {
		t.Fatalf("no waiting view: %+v", doc)
	}
	w := doc.Waiting
	ts := []time.Time{w.Since, w.Cause.At}
	for _, m := range w.Members {
		ts = append(ts, m.Since)
		if m.Deadline != nil {
			ts = append(ts, *m.Deadline)
		}
	}
	for _, tm := range ts {
		if tm.Location() != time.UTC {
			js, _ := json.Marshal(w)
			t.Fatalf("time %v in zone %q, want UTC: %s", tm, tm.Location(), js)
		}
	}
}

// TestHistoryZoneStoredOffsets: events stored with another zone's offset (by
// a version that recorded local times, or a node in another zone), plain
// (version 0) or compressed (version 1), still load, and are served in UTC
// at the same instants.
func TestHistoryZoneStoredOffsets(t *testing.T) {
	h := zoneHistory(t)
	live := h.s.History("g")
	old := time.FixedZone("", 5*3600+1800)
	for i, e := range live {
		// The event as the older version stored it: its times in the
		// node's zone.
		e.Start, e.End, e.Cause.At = e.Start.In(old), e.End.In(old), e.Cause.At.In(old)
		if e.Cause.LastHeartbeat != nil {
			lh := e.Cause.LastHeartbeat.In(old)
			e.Cause.LastHeartbeat = &lh
		}
		e.MoreCauses = slices.Clone(e.MoreCauses) // live's are compared below
		for j := range e.MoreCauses {
			e.MoreCauses[j].At = e.MoreCauses[j].At.In(old)
		}
		js, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(js, []byte("+05:30")) {
			t.Fatalf("the old event carries no offset: %s", js)
		}
		v := binary.BigEndian.AppendUint16(nil, uint16(i%2)) // versions 0 and 1
		if i%2 == 0 {
			v = append(v, js...)
		} else {
			v = append(v, s2.Encode(nil, js)...)
		}
		h.store[string(historyKey("g", e.Seq))] = v
	}
	setZone(t, "Y", -3*3600)
	got := h.reload().History("g")
	wantUTC(t, "reloaded", got)
	if !reflect.DeepEqual(live, got) {
		t.Fatalf("stored with offsets, reloaded as\n%#v\nwant\n%#v", got, live)
	}
}
