package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzConsumerGroupHeartbeats drives KIP-848 heartbeats with fuzz-chosen
// field values (extreme and stale epochs, timeouts, subscriptions, invalid
// regexes, unknown assignors, instance ids, owned partitions that do not
// exist) through the shard, between topic creations, growths and deletions,
// writes held or failed, commits at member epochs and describes. It checks
// that nothing panics, every answer encodes, no partition ever has two
// owners, and the state rebuilt from the store equals the live one.
// FuzzShardRequests does not reach this API (its keys stop at 63).
//
//	go test -run '^$' -fuzz FuzzConsumerGroupHeartbeats -fuzztime 1m ./group/
func FuzzConsumerGroupHeartbeats(f *testing.F) {
	for _, s := range cgFuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runConsumerGroupHeartbeats(t, data) })
}

// FuzzConsumerGroupHeartbeatsHistoryOff is FuzzConsumerGroupHeartbeats run
// twice, with history kept and with history off (historyOffTwin).
//
//	go test -run '^$' -fuzz FuzzConsumerGroupHeartbeatsHistoryOff -fuzztime 1m -parallel 1 ./group/
func FuzzConsumerGroupHeartbeatsHistoryOff(f *testing.F) {
	for _, s := range cgFuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		historyOffTwin(t, func(mod func(*Config)) *h { return runConsumerGroupHeartbeats(t, data, mod) })
	})
}

var cgFuzzSeeds = [][]byte{
	{0, 0, 0, 0, 0, 0xf, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 0xf, 0, 0, 0, 0, 6},
	{0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 0xf, 0, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 6, 2, 7, 6},
}

// runConsumerGroupHeartbeats is FuzzConsumerGroupHeartbeats's body; it
// returns the harness once done.
func runConsumerGroupHeartbeats(t *testing.T, data []byte, mod ...func(*Config)) *h {
	h, cat := newCH(t, map[string]int32{"a": 3, "b": 2, "c": 1}, mod...)
	h.passHistory = len(mod) > 0 // historyOffTwin's run
	h.s.Logf = func(string, ...any) {}
	vlog := func(f string, a ...any) {
		if testing.Verbose() {
			t.Logf(f, a...)
		}
	}
	src := byteSource(data)
	b := src.next
	i32 := func() int32 {
		var x [4]byte
		for i := range x {
			x[i] = b()
		}
		return int32(binary.BigEndian.Uint32(x[:]))
	}
	last := map[string]*kmsg.ConsumerGroupHeartbeatResponse{}
	regexes := []string{"a|b", "(", "", ".*", "c.*", "[", "new.*", "(?i)A"}
	steps := 0
	for len(src) > 0 && steps < 60 {
		steps++
		if h.s.NeedsReload() && h.s.PendingWrites() == 0 && len(h.held) == 0 {
			// as the runtime: a failed applied write discards the shard
			logf := h.s.Logf
			h.s = h.reload()
			h.s.Logf = logf
			h.staleMeta = map[string]bool{}
		}
		switch b() % 8 {
		case 0, 1:
			g := fmt.Sprintf("g%d", b()%2)
			mi := b() % 5
			member := fmt.Sprintf("m%d", mi)
			if mi == 4 {
				member = ""
			}
			key := g + "/" + member
			prev := last[key]
			o := hb{group: g, member: member}
			switch e := b() % 8; e {
			case 0:
				o.epoch = 0
			case 1:
				o.epoch = -1
			case 2:
				o.epoch = -2
			case 3, 4:
				if prev != nil {
					o.epoch = prev.MemberEpoch
				}
			case 5:
				if prev != nil {
					o.epoch = prev.MemberEpoch + 1
				}
			case 6:
				o.epoch = 2147483647
			case 7:
				o.epoch = i32()
			}
			fl := b()
			switch fl % 5 {
			case 0:
				o.rebalance = -1
			case 1:
				o.rebalance = 2147483647
			case 2:
				o.rebalance = i32()
			case 3:
				o.rebalance = 1
			}
			if fl&0x8 != 0 {
				var names []string
				m := b()
				for i, n := range []string{"a", "b", "c", "new", ""} {
					if m&(1<<i) != 0 {
						names = append(names, n)
					}
				}
				if names == nil {
					names = []string{}
				}
				o.names = names
			}
			if fl&0x10 != 0 {
				re := regexes[b()%byte(len(regexes))]
				o.regex = &re
			}
			if fl&0x20 != 0 {
				as := []string{"uniform", "range", "bogus", ""}[b()%4]
				o.assignor = &as
			}
			if fl&0x40 != 0 {
				inst := []string{"i0", "i1", ""}[b()%3]
				o.instance = &inst
			}
			if fl&0x80 != 0 {
				switch b() % 3 {
				case 0:
					o.owned = tpset{}
				case 1:
					if prev != nil {
						o.owned = assigned(prev)
						if o.owned != nil {
							delete(o.owned, "")
						}
					}
				case 2:
					o.owned = tpset{"a": {int32(b() % 4), -1}, "c": {0}}
				}
			}
			req := h.cgReq(o)
			if b()%4 == 0 {
				req.Version = 0
			}
			tk := h.do(func(tk Ticket, out *Output) {
				h.s.ConsumerGroupHeartbeat(h.now, tk, Client{ID: "c", Host: "h", Principal: "User:x"}, req, out)
			})
			if r, ok := h.got[tk]; ok {
				resp := r.(*kmsg.ConsumerGroupHeartbeatResponse)
				resp.AppendTo(nil)
				em := ""
				if resp.ErrorMessage != nil {
					em = *resp.ErrorMessage
				}
				vlog("hb v%d %s/%s epoch=%d reb=%d names=%v regex=%v fail=%d hold=%v -> code=%d %q epoch=%d", req.Version, g, member, req.MemberEpoch, req.RebalanceTimeoutMillis, req.SubscribedTopicNames, req.SubscribedTopicRegex != nil, h.fail, h.hold, resp.ErrorCode, em, resp.MemberEpoch)
				if resp.ErrorCode == 0 {
					if resp.MemberID != nil && member == "" {
						key = g + "/" + *resp.MemberID
					}
					last[key] = resp
				}
			}
		case 2:
			vlog("advance")
			h.advance(time.Duration(b()) * 500 * time.Millisecond)
		case 3:
			switch b() % 4 {
			case 0:
				cat.Create("new", int32(b()%4)+1, nil)
			case 1:
				cat.Delete("new")
			case 2:
				tp, ok := cat.Lookup("a")
				if ok {
					cat.AddPartitions("a", tp.Partitions+1, nil)
				}
			case 3:
				cat.Delete("b")
			}
		case 4:
			h.hold = !h.hold
			if !h.hold {
				h.release()
			}
		case 5:
			vlog("toggle fail")
			if b()%4 == 0 {
				h.fail = ErrNotCoordinator
			} else {
				h.fail = ErrNone
			}
		case 6:
			for _, g := range []string{"g0", "g1"} {
				if d := doubleOwner(h.cgroup(g)); d != "" {
					t.Fatal(d)
				}
			}
		case 7:
			if x := b(); x%2 == 0 {
				g := fmt.Sprintf("g%d", b()%2)
				member := fmt.Sprintf("m%d", b()%4)
				var epoch int32
				if r := last[g+"/"+member]; r != nil {
					epoch = r.MemberEpoch
				}
				switch b() % 4 {
				case 1:
					epoch = -1
				case 2:
					epoch++
				case 3:
					member = ""
				}
				req := commitReq(g, member, epoch)
				req.Topics[0].Topic = []string{"a", "b", "new"}[b()%3]
				req.Topics[0].Partitions[0].Partition = int32(b()%5) - 1
				req.Topics[0].Partitions[0].Offset = int64(b())
				tk := h.do(func(tk Ticket, out *Output) { h.s.OffsetCommit(h.now, tk, req, out) })
				if r, ok := h.got[tk]; ok {
					r.AppendTo(nil)
				}
				break
			}
			for _, g := range []string{"g0", "g1"} {
				d := h.s.DescribeConsumerGroup(g, 1, true)
				r := kmsg.NewPtrConsumerGroupDescribeResponse()
				r.Version = 1
				r.Groups = append(r.Groups, d)
				r.AppendTo(nil)
			}
		}
	}
	h.release()
	h.fail = ErrNone
	if h.s.NeedsReload() {
		if h.s.PendingWrites() > 0 {
			return h
		}
		h.s = h.reload()
		h.s.Logf = func(string, ...any) {}
		h.staleMeta = map[string]bool{}
	}
	for _, g := range []string{"g0", "g1"} {
		if d := doubleOwner(h.cgroup(g)); d != "" {
			t.Fatal(d)
		}
	}
	if d := h.checkReload(); d != "" {
		t.Fatal(d)
	}
	// compare consumer group descriptions with a reloaded shard
	if h.s.PendingWrites() == 0 {
		re := h.reload()
		for _, g := range []string{"g0", "g1"} {
			enc := func(s *Shard) []byte {
				d := s.DescribeConsumerGroup(g, 1, false)
				r := kmsg.NewPtrConsumerGroupDescribeResponse()
				r.Version = 1
				r.Groups = append(r.Groups, d)
				return r.AppendTo(nil)
			}
			if a, b := enc(h.s), enc(re); !bytes.Equal(a, b) && !h.staleMeta[g] {
				la, lb := h.s.DescribeConsumerGroup(g, 1, false), re.DescribeConsumerGroup(g, 1, false)
				t.Fatalf("cg %s differs after reload:\nlive %+v\nre   %+v", g, la, lb)
			}
		}
	}
	h.advance(time.Hour)
	var out Output
	h.s.Unload(h.now, &out)
	h.settle(&out)
	return h
}
