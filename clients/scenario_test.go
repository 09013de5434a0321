package clients

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/clients/testbed"
)

// MemberConfig is what a client-specific starter needs for one member.
type MemberConfig struct {
	Group, Topic string
	ClientID     string // unique per member; the router blocks it on Kill
	Instance     string // static membership (group.instance.id), "" = dynamic
	Protocol     string // "range", "roundrobin", "cooperative-sticky", "sticky"
	Seen         *testbed.Seen
	Session      time.Duration // 0 = sessionTimeout
	// OnRecord, if set, is called for each processed record (partition).
	OnRecord func(partition int32)
}

// process is a member's handling of one record: it records the delivery and
// takes a little time, so that consumption is still under way while members
// come and go.
func (c MemberConfig) process(value string, partition int32) {
	c.Seen.Add(value)
	if c.OnRecord != nil {
		c.OnRecord(partition)
	}
	time.Sleep(processTime) // the behaviour under test: a consumer that takes time per record
}

const processTime = 2 * time.Millisecond

func (c MemberConfig) session() time.Duration {
	if c.Session > 0 {
		return c.Session
	}
	return sessionTimeout
}

// Member is one running group member of some client.
type Member interface {
	// Close commits what was processed and leaves the group (gracefully).
	Close()
}

// Starter starts one member.
type Starter func(t *testing.T, b *testbed.Bed, c MemberConfig) Member

// Session timeouts of the members: short, but not tiny, so a slow machine
// does not evict live members.
const (
	sessionTimeout   = 4 * time.Second
	heartbeat        = 400 * time.Millisecond
	rebalanceTimeout = 20 * time.Second
)

// killer makes members vanish as crashed processes would: the router cuts
// their connections and refuses their requests, so they cannot leave the
// group and cohort evicts them when their sessions expire. Their client
// objects are closed in the background; once the test is over the router
// lets them through again so that those closes finish quickly.
type killer struct {
	b      *testbed.Bed
	wg     sync.WaitGroup
	killed []string
}

func (k *killer) kill(m Member, clientID string) {
	k.b.Router.Block(clientID)
	k.killed = append(k.killed, clientID)
	if p, ok := m.(interface{ Kill() }); ok {
		// A child process: SIGKILL it. The short pause (not a wait for a
		// condition: the child reports nothing to await) lets it write
		// out the records it had taken before the block (whose offsets
		// it may have committed): what matters is that nothing it
		// does after the block reaches cohort.
		time.Sleep(300 * time.Millisecond)
		p.Kill()
		return
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		m.Close()
	}()
}

// finish unblocks the killed members and waits (bounded) for their closes.
func (k *killer) finish(t *testing.T) {
	for _, id := range k.killed {
		k.b.Router.Unblock(id)
	}
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Logf("killed members' clients still closing after 60s: %v", k.killed)
	}
}

// waitMembers waits until a generation later than after gives assignments to
// exactly n members, and returns it.
func waitMembers(ctx context.Context, t *testing.T, b *testbed.Bed, grp string, after int32, n int) int32 {
	t.Helper()
	var gen int32
	err := testbed.WaitFor(ctx, fmt.Sprintf("a generation > %d with %d members", after, n), func() bool {
		g := b.Router.Journal.LastGeneration(grp)
		if g <= after {
			return false
		}
		if len(b.Router.Journal.Assignment(grp, g)) == n {
			gen = g
			return true
		}
		return false
	})
	if err != nil {
		t.Fatalf("%v (generations %v, last %v)", err, b.Router.Journal.Generations(grp),
			b.Router.Journal.Assignment(grp, b.Router.Journal.LastGeneration(grp)))
	}
	return gen
}

// runChurn is test 1 for one client: K records on P partitions, consumed by a
// group whose members are added, killed and stopped while it consumes.
//
//	2 members start on the first half of the records; a third joins; the
//	first is killed (evicted at session expiry); the second half is
//	produced; a fourth joins; the second leaves gracefully; consumption ends
//	with the committed offsets at the log end.
//
// It marks t parallel: every churn runs on its own bed.
func runChurn(t *testing.T, start Starter, protocol string, opts ...testbed.CheckOpts) {
	t.Parallel()
	const (
		topic = "churn"
		P     = 6
		K     = 3000
	)
	b := testbed.Start(t, testbed.Options{Topics: map[string]int32{topic: P}})
	grp := "churn-" + protocol
	b.Produce(t, topic, P, 0, K/2)
	seen := testbed.NewSeen()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	k := &killer{b: b}
	defer k.finish(t)
	members := map[int]Member{}
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	add := func(i int) {
		members[i] = start(t, b, MemberConfig{Group: grp, Topic: topic, ClientID: fmt.Sprintf("m%d", i),
			Protocol: protocol, Seen: seen})
	}
	progress := func(n int) {
		t.Helper()
		if err := testbed.WaitFor(ctx, fmt.Sprintf("%d records processed", n), func() bool { return seen.Distinct() >= n }); err != nil {
			t.Fatalf("%v (processed %d)", err, seen.Distinct())
		}
	}

	add(1)
	add(2)
	gen := waitMembers(ctx, t, b, grp, 0, 2)
	progress(K / 8)
	add(3)
	gen = waitMembers(ctx, t, b, grp, gen, 3)
	k.kill(members[1], "m1")
	delete(members, 1)
	gen = waitMembers(ctx, t, b, grp, gen, 2)
	b.Produce(t, topic, P, K/2, K/2)
	add(4)
	gen = waitMembers(ctx, t, b, grp, gen, 3)
	members[2].Close()
	delete(members, 2)
	waitMembers(ctx, t, b, grp, gen, 2)
	progress(K)
	if len(opts) > 0 && opts[0].StrayCommitsOK {
		// A stray commit may have moved a partition's committed offset
		// back after its owner's last commit, and nothing new arrives
		// to make the owner commit again: stop the group and let one
		// new member consume from the committed offsets to the end
		// (redelivering, which at-least-once allows).
		for i, m := range members {
			m.Close()
			delete(members, i)
		}
		add(5)
	}
	if err := b.WaitCommitted(ctx, grp, b.EndOffsets(t, topic)); err != nil {
		t.Fatal(err)
	}
	b.Check(t, grp, topic, K, seen, opts...)
}
