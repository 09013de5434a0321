package group

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSimulation drives groups through thousands of random steps (joins,
// rejoins with changed metadata, leaves, crashes that stop heartbeats, slow
// or missing leader syncs, static restarts, stale requests, clock advances,
// failed and delayed writes, deleted groups and offsets, offset expiry) and
// checks these invariants after every step:
//   - at most one leader per generation; generations only grow;
//   - every member synced in a generation got exactly the bytes the leader
//     set for it (or the empty assignment if the leader left it out);
//   - a request with a stale generation or an unknown member changes nothing;
//   - every parked request is answered within its deadline;
//   - a shard reloaded from the stored records answers OffsetFetch, and for
//     groups at rest DescribeGroups, as the live shard does (checkReload).
func TestSimulation(t *testing.T) {
	seeds := 100
	steps := 5000
	if testing.Short() || raceEnabled {
		// The race detector finds nothing here (the shard is single
		// threaded) and slows the simulation tenfold: the short run.
		seeds, steps = 8, 3000
	}
	if n, err := strconv.Atoi(os.Getenv("COHORT_SIM_SEEDS")); err == nil && n > 0 {
		seeds = n // longer soak runs: COHORT_SIM_SEEDS=2000 go test -run Simulation ./group/
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, uint64(seed), steps) })
	}
}

type simActor struct {
	name     string
	instance string // static members only
	member   string
	gen      int32
	pending  Ticket // outstanding request, 0 if none
	kind     string // "join" or "sync" while pending
	alive    bool   // heartbeats (crashed actors stay silent until they restart)
	meta     string
	leader   bool
}

type simParked struct {
	at   time.Time
	what string
}

func simulate(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed*7919+1))
	h := newH(t, func(c *Config) {
		c.InitialRebalanceDelay = time.Duration(rng.IntN(3)) * time.Second
		if rng.IntN(3) == 0 {
			c.MaxSize = 3 + rng.IntN(3)
		}
		// A short history bound: the reload check decodes every stored
		// event after each write, and a small random bound also exercises
		// trimming (the bound's default, 100, made the package time out
		// under -race).
		c.HistorySize = 1 + rng.IntN(8)
	})
	h.s.rand = seededReader{rand.NewChaCha8([32]byte{byte(seed), 9})}

	var actors []*simActor
	for i := 0; i < 3+rng.IntN(5); i++ {
		a := &simActor{name: fmt.Sprintf("c%d", i), alive: true, meta: "m0"}
		if rng.IntN(3) == 0 {
			a.instance = fmt.Sprintf("i%d", i)
		}
		actors = append(actors, a)
	}
	const g = "sim"
	leaders := map[int32]map[string]bool{}    // generation → leader ids seen in join responses
	assigned := map[int32]map[string]string{} // generation → member → bytes the leader set
	lastGen := int32(0)
	generations := int32(0) // the most generations one incarnation of the group reached
	parked := map[Ticket]simParked{}
	deadline := 7 * time.Minute // ≥ new-member timeout + rebalance/session timeouts
	byTicket := map[Ticket]*simActor{}
	verified := 0 // successful syncs checked against the leader's bytes
	instanceOf := map[string]string{}
	reloads := 0 // steps at which a reloaded shard was compared with the live one
	checkedAt := -1
	deleted := 0 // successful DeleteGroups

	snapshot := func() string {
		gr := h.s.Group(g)
		if gr == nil {
			return "none"
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "%v/%d/%s/%s/", gr.state, gr.generation, gr.leader, gr.protocol)
		for _, m := range gr.members {
			fmt.Fprintf(&b, "%s:%x:%v:%v,", m.id, m.assignment, m.join != nil, m.sync != nil)
		}
		for _, tp := range gr.sortedOffsets() {
			fmt.Fprintf(&b, "%s/%d=%d,", tp.topic, tp.partition, func() int64 { o, _ := gr.offsets.get(tp); return o.offset }())
		}
		return b.String()
	}

	// collect processes every new answer.
	collect := func() {
		for tk, p := range parked {
			resp, ok := h.got[tk]
			if !ok {
				if h.now.Sub(p.at) > deadline {
					t.Fatalf("seed %d: %s (ticket %d) parked since %v, not answered after %v", seed, p.what, tk, p.at, h.now.Sub(p.at))
				}
				continue
			}
			delete(parked, tk)
			a := byTicket[tk]
			delete(byTicket, tk)
			if jr, ok := resp.(*kmsg.JoinGroupResponse); ok && a != nil && a.instance != "" && jr.ErrorCode == ErrNone {
				instanceOf[jr.MemberID] = a.instance // even if the actor moved on
			}
			if a == nil || a.pending != tk {
				continue // superseded
			}
			a.pending = 0
			switch r := resp.(type) {
			case *kmsg.JoinGroupResponse:
				a.kind = ""
				switch r.ErrorCode {
				case ErrNone:
					if leaders[r.Generation] == nil {
						leaders[r.Generation] = map[string]bool{}
					}
					leaders[r.Generation][r.LeaderID] = true
					a.member, a.gen = r.MemberID, r.Generation
					a.leader = r.LeaderID == r.MemberID && !r.SkipAssignment
				case ErrMemberIDRequired:
					a.member = r.MemberID
				case ErrUnknownMemberID, ErrFencedInstanceID, ErrGroupMaxSizeReached:
					a.member, a.gen = "", 0
				}
			case *kmsg.SyncGroupResponse:
				a.kind = ""
				if r.ErrorCode == ErrNone {
					want, ok := assigned[a.gen][a.member]
					if !ok && a.instance != "" {
						// Replaced static member: its assignment moved with it.
						for id, b := range assigned[a.gen] {
							if instanceOf[id] == a.instance {
								want, ok = b, true
							}
						}
					}
					if !ok {
						// The leader left this member out: empty assignment.
						want = string(h.s.Group(g).emptyAssignment())
						if _, set := assigned[a.gen]; !set {
							// Stable from a load or an earlier leader we did not
							// record (e.g. before a static replacement): skip.
							want = string(r.MemberAssignment)
						}
					}
					verified++
					if string(r.MemberAssignment) != want {
						t.Fatalf("seed %d: %s gen %d synced %q, leader set %q", seed, a.member, a.gen, r.MemberAssignment, want)
					}
				} else if r.ErrorCode == ErrUnknownMemberID || r.ErrorCode == ErrFencedInstanceID {
					a.member, a.gen = "", 0
				}
			}
		}
		// One leader per generation. A static leader replaced in place
		// (KIP-345/814) keeps leading the same generation under a new member
		// id, so leaders compare by instance where there is one.
		for gen, ids := range leaders {
			if gen < lastGen-1 {
				continue // checked when it was current
			}
			var first string
			for id := range ids {
				k := id
				if inst, ok := instanceOf[id]; ok {
					k = "instance:" + inst
				}
				if first == "" {
					first = k
				} else if k != first {
					t.Fatalf("seed %d: generation %d has leaders %v", seed, gen, ids)
				}
			}
		}
		if gr := h.s.Group(g); gr != nil {
			if gr.generation < lastGen {
				t.Fatalf("seed %d: generation went back from %d to %d", seed, lastGen, gr.generation)
			}
			lastGen = gr.generation
			generations = max(generations, lastGen)
		} else {
			// Deleted (DeleteGroups, expiry): a new group starts over;
			// what the actors remember of the old one is stale.
			lastGen = 0
			clear(leaders)
			clear(assigned)
		}
	}

	issue := func(a *simActor, kind string, tk Ticket) {
		if !h.answered(tk) || kind != "" {
			a.pending = tk
			a.kind = kind
			byTicket[tk] = a
			parked[tk] = simParked{at: h.now, what: a.name + " " + kind}
		}
	}

	for step := 0; step < steps; step++ {
		a := actors[rng.IntN(len(actors))]
		switch x := rng.IntN(100); {
		case x < 8: // clock moves
			h.advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
		case x < 10 && a.alive: // crash: stop heartbeating; pending requests stay parked
			a.alive = false
		case x < 13 && !a.alive: // restart
			a.alive = true
			a.pending, a.kind = 0, ""
			if a.instance == "" {
				a.member = ""
			} else {
				a.member = "" // static restart rejoins with an empty id
			}
			a.gen = 0
		case !a.alive || a.pending != 0:
			// a crashed or parked actor does nothing
		case x < 35: // join (sometimes with changed metadata or protocols)
			if rng.IntN(5) == 0 {
				a.meta = fmt.Sprintf("m%d", rng.IntN(3))
			}
			ps := protos("range", a.meta)
			if rng.IntN(6) == 0 {
				ps = protos("roundrobin", a.meta, "range", a.meta)
			}
			o := jo{member: a.member, instance: a.instance, protos: ps, client: a.name}
			if rng.IntN(4) == 0 {
				o.v = 3 // no KIP-394 step
			}
			issue(a, "join", h.join(g, o))
		case x < 50: // sync (the leader sets assignments; sometimes leaves someone out)
			var assign map[string]string
			if a.leader {
				assign = map[string]string{}
				if gr := h.s.Group(g); gr != nil {
					for _, m := range gr.members {
						if rng.IntN(6) != 0 {
							assign[m.id] = fmt.Sprintf("%s@%d#%d", m.id, a.gen, rng.IntN(100))
						}
					}
				}
				if gr := h.s.Group(g); gr != nil && gr.state == CompletingRebalance && gr.generation == a.gen && !gr.syncWriting && gr.leader == a.member {
					assigned[a.gen] = assign
				}
			}
			if rng.IntN(10) == 0 {
				h.hold = true // a slow store: the leader's write stays in flight
			}
			issue(a, "sync", h.sync(g, a.member, a.gen, assign, instOf(a)...))
		case x < 75: // heartbeat
			code := h.heartbeat(g, a.member, a.gen, instOf(a)...)
			if code == ErrUnknownMemberID || code == ErrFencedInstanceID {
				a.member, a.gen = "", 0
			}
		case x < 82: // commit
			if rng.IntN(8) == 0 {
				h.fail = ErrCoordinatorNotAvailable
			}
			req := commitReq(g, a.member, a.gen)
			req.Topics[0].Partitions[0].Offset = int64(step)
			tk := h.do(func(t Ticket, out *Output) { h.s.OffsetCommit(h.now, t, req, out) })
			if !h.answered(tk) { // held write: must be answered later
				parked[tk] = simParked{at: h.now, what: a.name + " commit"}
			}
			h.fail = ErrNone
		case x < 86: // leave (static members usually do not)
			if a.instance == "" || rng.IntN(3) == 0 {
				h.leave(g, lm(a.member, a.instance))
				a.member, a.gen = "", 0
			}
		case x < 95: // stale or bogus requests must change nothing
			before := snapshot()
			switch rng.IntN(4) {
			case 0:
				h.heartbeat(g, a.member, a.gen-1-int32(rng.IntN(3)), instOf(a)...)
			case 1:
				h.commit(g, a.member, a.gen+1+int32(rng.IntN(3)), 9, map[string]int64{"t": -1})
			case 2:
				h.heartbeat(g, "ghost-"+a.name, a.gen)
			case 3:
				h.sync(g, "ghost-"+a.name, a.gen, map[string]string{"x": "y"})
			}
			if after := snapshot(); after != before {
				t.Fatalf("seed %d step %d: stale request changed state\nbefore %s\nafter  %s", seed, step, before, after)
			}
		case x < 97: // admin: delete the group or an offset, or sweep expired offsets
			switch rng.IntN(3) {
			case 0:
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Version, req.Groups = 2, []string{g}
				tk := h.do(func(t Ticket, out *Output) { h.s.DeleteGroups(h.now, t, req, out) })
				if r, ok := h.got[tk].(*kmsg.DeleteGroupsResponse); ok && r.Groups[0].ErrorCode == ErrNone {
					deleted++
				}
			case 1:
				req := kmsg.NewPtrOffsetDeleteRequest()
				req.Group = g
				rt := kmsg.NewOffsetDeleteRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				h.do(func(t Ticket, out *Output) { h.s.OffsetDelete(h.now, t, req, out) })
			case 2:
				var out Output
				h.s.ExpireOffsets(h.now.Add(8*24*time.Hour), &out)
				h.settle(&out)
			}
		default:
			if h.hold {
				h.release()
			}
		}
		if h.hold && rng.IntN(4) == 0 {
			h.release()
		}
		collect()
		// Compare with a reloaded shard after every completed write, and
		// every few steps besides (a rebalance settles without a write).
		if h.completed != checkedAt || step%8 == 0 {
			if diff := h.checkReload(); diff != "" {
				t.Fatalf("seed %d step %d: %s", seed, step, diff)
			}
			checkedAt = h.completed
			reloads++
		}
	}
	// Drain: release writes, let every timer run; everything parked must end.
	h.release()
	for i := 0; i < 100 && len(parked) > 0; i++ {
		h.advance(10 * time.Second)
		collect()
	}
	if len(parked) > 0 {
		t.Fatalf("seed %d: %d requests never answered", seed, len(parked))
	}
	// The run must have exercised the protocol, or it proves nothing.
	if generations < 3 || verified < 3 {
		t.Fatalf("seed %d: only %d generations and %d verified syncs", seed, generations, verified)
	}
	if reloads < steps/10 {
		t.Fatalf("seed %d: only %d reload comparisons in %d steps", seed, reloads, steps)
	}
	t.Logf("seed %d: %d generations, %d syncs verified, %d tickets, %d reload comparisons, %d deletions", seed, generations, verified, h.tick, reloads, deleted)
}

func instOf(a *simActor) []string {
	if a.instance == "" {
		return nil
	}
	return []string{a.instance}
}
