package group

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
)

// TestConsumerSimulation drives consumer-protocol groups (KIP-848) through
// thousands of seeded random steps: members join, heartbeat, leave, crash
// (their sessions expire), restart as the same static instance, change
// subscriptions, revoke slowly, lose heartbeat answers and retry; topics are
// created, grown and deleted; writes fail (the shard then reloads from the
// store). After every step it checks:
//
//   - no partition is owned by two members at once, where a member owns
//     what it last listed as owned plus what it was given and has not yet
//     acknowledged giving up (it counts as owner until a heartbeat of its
//     no longer lists the partition), over the members the coordinator
//     still has;
//   - the coordinator's own books agree: no partition is assigned or
//     pending on two members;
//   - a shard reloaded from the store answers as the live one.
//
// At the end the chaos stops and every member keeps heartbeating: all must
// converge, each owning exactly its target, at the assignment epoch.
func TestConsumerSimulation(t *testing.T) {
	seeds, steps := 60, 3000
	if testing.Short() || raceEnabled {
		seeds, steps = 8, 1500
	}
	if n, err := strconv.Atoi(os.Getenv("COHORT_SIM_SEEDS")); err == nil && n > 0 {
		seeds = n
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulateConsumers(t, uint64(seed), steps) })
	}
}

type cactor struct {
	name     string
	member   string
	instance string // static members only
	epoch    int32
	alive    bool
	joined   bool
	names    []string
	owned    tpset // what the client owns (and lists)
	// revoking are partitions the server asked it to give up that it is
	// still working on (slow revocation): they stay in owned until done.
	revoking tpset
	slowFor  int // heartbeats left before it finishes revoking
	// needFull: the last answer was lost; like real clients, the next
	// heartbeat is a full request (which the coordinator answers with the
	// whole assignment).
	needFull bool
}

func simulateConsumers(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed*31+7))
	cat := catalog.New(catalog.Options{})
	topicNames := []string{"a", "b", "c"}
	for _, n := range topicNames[:2] {
		if _, err := cat.Create(n, int32(1+rng.IntN(6)), nil); err != nil {
			t.Fatal(err)
		}
	}
	h := newH(t, func(c *Config) {
		c.Topics = cat
		c.ConsumerSessionTimeout = 10 * time.Second
		// A small history bound: the calm phase reloads after every
		// heartbeat and each reload decodes the kept events' JSON (the
		// bound and the tombstones it writes are exercised). Not drawn
		// from rng so that the seeds' runs stay as they were.
		c.HistorySize = 1 + int(seed%3)
		if rng.IntN(2) == 0 {
			c.ConsumerAssignors = []string{"range", "uniform"}
		}
		// Target computations batched (seed%3 == 0: on every change, as
		// Kafka before 4.3; else a wait of 20 µs or 100 ms per member,
		// the latter spanning the clock's steps so that members often
		// reconcile against a target behind the group epoch).
		c.ConsumerAssignmentDelayPerMember = []time.Duration{0, 20 * time.Microsecond, 100 * time.Millisecond}[seed%3]
	})
	const g = "csim"
	var actors []*cactor
	for i := 0; i < 3+rng.IntN(5); i++ {
		a := &cactor{name: fmt.Sprintf("c%d", i), alive: true, owned: tpset{}, revoking: tpset{}}
		if rng.IntN(3) == 0 {
			a.instance = fmt.Sprintf("i%d", i)
		}
		a.names = []string{"a"}
		if rng.IntN(2) == 0 {
			a.names = []string{"a", "b"}
		}
		actors = append(actors, a)
	}
	nextID := 0
	newID := func(a *cactor) string {
		nextID++
		return fmt.Sprintf("%s-%d", a.name, nextID)
	}
	reloads := 0

	// send sends a's heartbeat; lost means the answer never reaches it.
	send := func(a *cactor, epoch int32, full, lost bool) {
		o := hb{group: g, member: a.member, epoch: epoch}
		if a.instance != "" && (epoch <= 0 || rng.IntN(2) == 0) {
			inst := a.instance
			o.instance = &inst
		}
		if epoch == 0 || full {
			o.names = slices.Clone(a.names)
			o.rebalance = 30000
		}
		switch {
		case epoch == 0:
			o.owned = tpset{}
		case rng.IntN(8) == 0 && !full:
			// a keepalive without owned partitions (null)
		default:
			o.owned = a.owned.clone()
		}
		req := h.cgReq(o)
		if rng.IntN(20) == 0 {
			h.fail = ErrCoordinatorNotAvailable
		}
		tk := h.do(func(tk Ticket, out *Output) {
			h.s.ConsumerGroupHeartbeat(h.now, tk, Client{ID: a.name, Host: "127.0.0.1"}, req, out)
		})
		h.fail = ErrNone
		if h.s.NeedsReload() {
			h.s = h.reload()
			reloads++
		}
		resp, ok := h.got[tk].(*kmsg.ConsumerGroupHeartbeatResponse)
		if !ok || lost {
			a.needFull = true
			return
		}
		a.needFull = false
		switch resp.ErrorCode {
		case ErrNone:
			if epoch < 0 {
				a.joined, a.epoch = false, 0
				a.owned, a.revoking = tpset{}, tpset{}
				return
			}
			a.epoch = resp.MemberEpoch
			if resp.Assignment == nil {
				return
			}
			next := tpset{}
			for _, at := range resp.Assignment.Topics {
				topic, ok := cat.LookupID(at.TopicID)
				if !ok {
					t.Fatalf("seed %d: assignment names unknown topic id %x", seed, at.TopicID)
				}
				for _, p := range at.Partitions {
					next.add(topic.Name, p)
				}
			}
			for tp, ps := range a.owned {
				for _, p := range ps {
					if !next.has(tp, p) {
						a.revoking.add(tp, p)
					}
				}
			}
			for tp, ps := range next {
				for _, p := range ps {
					a.owned.add(tp, p)
				}
			}
			if a.revoking.size() > 0 && a.slowFor == 0 {
				a.slowFor = rng.IntN(3) // revocation takes a few heartbeats
			}
		case ErrFencedMemberEpoch, ErrUnknownMemberID, ErrGroupIDNotFound, ErrFencedInstanceID:
			// Lost its membership: stop working on everything, rejoin.
			a.joined, a.epoch = false, 0
			a.owned, a.revoking = tpset{}, tpset{}
			if resp.ErrorCode != ErrFencedMemberEpoch {
				a.member = newID(a)
			}
		}
	}
	// finishRevocations drops what a has finished revoking.
	finishRevocations := func(a *cactor) {
		if a.slowFor > 0 {
			a.slowFor--
			return
		}
		for tp, ps := range a.revoking {
			for _, p := range ps {
				if i, ok := slices.BinarySearch(a.owned[tp], p); ok {
					a.owned[tp] = slices.Delete(a.owned[tp], i, i+1)
					if len(a.owned[tp]) == 0 {
						delete(a.owned, tp)
					}
				}
			}
		}
		a.revoking = tpset{}
	}
	check := func(step int, reload bool) {
		h.checkNoDoubleOwner(g)
		cg := h.cgroup(g)
		owner := map[topicPartition]string{}
		for _, a := range actors {
			if !a.joined || cg == nil || cg.members[a.member] == nil {
				continue // not a member the coordinator knows: fenced or gone
			}
			for tp, ps := range a.owned {
				for _, p := range ps {
					k := topicPartition{tp, p}
					if o, ok := owner[k]; ok {
						t.Fatalf("seed %d step %d: %s/%d owned by %s and %s", seed, step, tp, p, o, a.name)
					}
					owner[k] = a.name
				}
			}
		}
		if !reload {
			return
		}
		if diff := h.checkReload(); diff != "" {
			t.Fatalf("seed %d step %d: %s", seed, step, diff)
		}
	}
	heartbeat := func(a *cactor, lost bool) {
		if !a.joined {
			if a.member == "" || a.instance != "" && rng.IntN(2) == 0 {
				a.member = newID(a)
			}
			a.joined = true
			send(a, 0, true, lost)
			return
		}
		finishRevocations(a)
		send(a, a.epoch, a.needFull || rng.IntN(10) == 0, lost)
	}

	for step := 0; step < steps; step++ {
		a := actors[rng.IntN(len(actors))]
		switch x := rng.IntN(100); {
		case x < 10:
			h.advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		case x < 12 && a.alive: // crash: silent until its session expires
			a.alive = false
		case x < 15 && !a.alive: // restart: a new process, same instance if static
			a.alive, a.joined, a.epoch = true, false, 0
			a.owned, a.revoking = tpset{}, tpset{}
			a.member = ""
		case !a.alive:
		case x < 70:
			heartbeat(a, rng.IntN(25) == 0)
		case x < 75 && a.joined: // leave (static members may leave with -2)
			e := epochLeave
			if a.instance != "" && rng.IntN(2) == 0 {
				e = epochStatic
			}
			send(a, e, false, false)
			if e == epochStatic {
				a.alive = false // it restarts later with a new member id
			}
		case x < 80 && a.joined: // change subscription
			a.names = []string{topicNames[rng.IntN(3)]}
			if rng.IntN(2) == 0 {
				a.names = append(a.names, topicNames[rng.IntN(3)])
			}
			finishRevocations(a)
			send(a, a.epoch, true, false)
		case x < 83: // topic changes
			n := topicNames[rng.IntN(3)]
			if tp, ok := cat.Lookup(n); !ok {
				cat.Create(n, int32(1+rng.IntN(6)), nil)
			} else if rng.IntN(3) == 0 {
				cat.Delete(n)
			} else if tp.Partitions < 12 {
				cat.AddPartitions(n, tp.Partitions+1, nil)
			}
		}
		check(step, step%16 == 0)
	}

	// Calm: every actor comes back and heartbeats until the group settles.
	for _, a := range actors {
		if !a.alive {
			a.alive, a.joined, a.member = true, false, ""
			a.owned, a.revoking = tpset{}, tpset{}
		}
	}
	settled := false
	for round := 0; round < 60 && !settled; round++ {
		for _, a := range actors {
			a.slowFor = 0
			heartbeat(a, false)
			check(steps+round, true)
		}
		h.advance(500 * time.Millisecond)
		cg := h.cgroup(g)
		settled = cg != nil && cg.state() == "Stable"
		if settled {
			for _, a := range actors {
				m := cg.members[a.member]
				if m == nil || !m.assigned.equal(cg.target[a.member]) || !a.owned.equal(m.assigned) {
					settled = false
				}
			}
		}
	}
	if !settled {
		cg := h.cgroup(g)
		var b []string
		for _, id := range cg.ids {
			m := cg.members[id]
			b = append(b, fmt.Sprintf("%s epoch %d state %v assigned %v pending %v target %v", id, m.epoch, m.state, m.assigned, m.pending, cg.target[id]))
		}
		for _, a := range actors {
			b = append(b, fmt.Sprintf("actor %s member %s joined %v epoch %d owned %v revoking %v", a.name, a.member, a.joined, a.epoch, a.owned, a.revoking))
		}
		t.Fatalf("seed %d: the group did not converge: state %s epochs %d/%d\n%s", seed, cg.state(), cg.epoch, cg.assignEpoch, strings.Join(b, "\n"))
	}
	t.Logf("seed %d: %d actors, group epoch %d, %d reloads after failed writes", seed, len(actors), h.cgroup(g).epoch, reloads)
}
