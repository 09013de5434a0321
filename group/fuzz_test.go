package group

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzShardRequests decodes arbitrary bytes as a sequence of group requests
// (kmsg decoders at arbitrary versions) and dispatches each decodable one
// into a Shard, interleaved with clock advances and write completions. The
// shard must never panic, every response must encode, and every ticket is
// answered at most once.
//
// Input layout, repeated: key byte, version byte, uint16 length, body.
func FuzzShardRequests(f *testing.F) {
	for _, s := range shardRequestSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runShardRequests(t, data) })
}

// FuzzShardRequestsHistoryOff is FuzzShardRequests run twice, with history
// kept and with history off (historyOffTwin).
//
//	go test -run '^$' -fuzz FuzzShardRequestsHistoryOff -fuzztime 1m -parallel 1 ./group/
func FuzzShardRequestsHistoryOff(f *testing.F) {
	for _, s := range shardRequestSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		historyOffTwin(t, func(mod func(*Config)) *h { return runShardRequests(t, data, mod) })
	})
}

// runShardRequests is FuzzShardRequests's body; it returns the harness
// once done.
func runShardRequests(t *testing.T, data []byte, mod ...func(*Config)) *h {
	h := newH(t, mod...)
	h.passHistory = len(mod) > 0 // historyOffTwin's run
	h.s.cfg.MinSessionTimeout = time.Millisecond
	for len(data) >= 4 {
		key, v := int16(data[0]%64), int16(data[1]%16)
		n := int(binary.BigEndian.Uint16(data[2:]))
		data = data[4:]
		if n > len(data) {
			n = len(data)
		}
		body := data[:n]
		data = data[n:]
		req := kmsg.RequestForKey(key)
		if req == nil {
			h.advance(time.Duration(key) * time.Second)
			continue
		}
		if v > req.MaxVersion() {
			v = req.MaxVersion()
		}
		req.SetVersion(v)
		if req.ReadFrom(body) != nil {
			continue
		}
		if key%7 == 0 {
			h.hold = true
		}
		h.do(func(tk Ticket, out *Output) {
			now := h.now
			switch r := req.(type) {
			case *kmsg.JoinGroupRequest:
				h.s.JoinGroup(now, tk, Client{ID: "c"}, r, out)
			case *kmsg.SyncGroupRequest:
				h.s.SyncGroup(now, tk, r, out)
			case *kmsg.HeartbeatRequest:
				h.s.Heartbeat(now, tk, r, out)
			case *kmsg.LeaveGroupRequest:
				h.s.LeaveGroup(now, tk, r, out)
			case *kmsg.OffsetCommitRequest:
				h.s.OffsetCommit(now, tk, r, out)
			case *kmsg.OffsetDeleteRequest:
				h.s.OffsetDelete(now, tk, r, out)
			case *kmsg.DeleteGroupsRequest:
				h.s.DeleteGroups(now, tk, r, out)
			case *kmsg.OffsetFetchRequest:
				out.reply(tk, h.s.OffsetFetch(r))
			case *kmsg.DescribeGroupsRequest:
				for _, id := range r.Groups {
					h.s.DescribeGroup(id, r.Version, r.IncludeAuthorizedOperations)
				}
			case *kmsg.ListGroupsRequest:
				h.s.ListGroups(r)
			default:
				if resp := ErrorResponse(req, ErrNotCoordinator); resp != nil {
					resp.AppendTo(nil)
				}
			}
		})
		if key%5 == 0 {
			h.release()
		}
	}
	h.release()
	h.advance(10 * time.Minute)
	for _, r := range h.got {
		r.AppendTo(nil) // every response encodes at its version
	}
	var out Output
	h.s.Unload(h.now, &out)
	h.settle(&out)
	return h
}

// shardRequestSeeds are FuzzShardRequests's seed inputs.
func shardRequestSeeds() [][]byte {
	var seeds [][]byte
	add := func(reqs ...kmsg.Request) {
		var b []byte
		for _, r := range reqs {
			body := r.AppendTo(nil)
			b = append(b, byte(r.Key()), byte(r.GetVersion()))
			b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
			b = append(b, body...)
		}
		seeds = append(seeds, b)
	}
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = 3, "g", 10000, 10000, "consumer"
	j.Protocols = protos("range", "m")
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.Generation = 3, "g", 1
	c := commitReq("g", "", -1)
	c.Version = 7
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group = 3, "g"
	l := kmsg.NewPtrLeaveGroupRequest()
	l.Version, l.Group = 3, "g"
	fe := kmsg.NewPtrOffsetFetchRequest()
	fe.Version, fe.Group = 7, "g"
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Groups = []string{"g"}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"g"}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	add(j, j, s, hb, c, fe, d, l, dg, od)
	add(c, fe, kmsg.NewPtrListGroupsRequest())
	return seeds
}
