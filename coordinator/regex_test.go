package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cohort-dev/cohort/catalog"
	"github.com/cohort-dev/cohort/group"
	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	"github.com/cohort-dev/cohort/store/memstore"
)

// A regex too costly for the partition's goroutine is matched on another
// (group.RegexJob): while its matching runs, the partition answers other
// requests, the member's own heartbeats included; once it ends, the member's
// next heartbeat brings the matching topics.
func TestCostlyRegexMatchedOffThePartition(t *testing.T) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	e := newRegexEnv(t, func() { started <- struct{}{}; <-release })

	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("zq%03dk", i)
	}
	regex := "service-00.*|" + strings.Join(words, "|") // ~2,000 instructions: over the shard's budget
	hb := func(member string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "slow", member, epoch
		r.RebalanceTimeoutMillis = -1
		if epoch == 0 {
			r.RebalanceTimeoutMillis, r.SubscribedTopicRegex, r.Topics = 60000, &regex, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp := e.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: code %d", resp.ErrorCode)
		}
		return resp
	}
	topics := func(r *kmsg.ConsumerGroupHeartbeatResponse) int { // the topics assigned (one partition each)
		if r.Assignment == nil {
			return 0
		}
		return len(r.Assignment.Topics)
	}

	r := hb("m1", 0)
	if topics(r) != 0 {
		t.Fatalf("%d partitions before the regex is matched", topics(r))
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no matching started")
	}
	// The matching is held: the partition still answers.
	if r = hb("m1", r.MemberEpoch); topics(r) != 0 {
		t.Fatalf("%d partitions while the matching is held", topics(r))
	}
	if code := e.do(joinReq("other", "", 4)).(*kmsg.JoinGroupResponse).ErrorCode; code != group.ErrMemberIDRequired {
		t.Fatalf("another group's JoinGroup: code %d", code)
	}
	close(release)
	testwait.For(t, 10*time.Second, "the matched topics reach the member", func() bool {
		r = hb("m1", r.MemberEpoch)
		return topics(r) == 200
	})
	select {
	case <-started:
		t.Fatal("a second matching ran for the same regex and catalog")
	default:
	}
}

// A regex matching queued for a regex no member uses any more is dropped,
// not run: a member that changed its costly regex at every heartbeat queued a
// matching each time, each run in turn on the node's one regex slot (seconds
// each for a long regex over many topics) while the queue grew, and the
// regexes of every other group of the node waited behind them.
func TestStaleRegexMatchingsDropped(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}, 1), make(chan struct{})
	e := newRegexEnv(t, func() {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
	})
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("zq%03dk", i)
	}
	regex := func(k int) *string { // each over the shard's budget, 200 topics
		r := fmt.Sprintf("service-0%d.*|", k) + strings.Join(words, "|")
		return &r
	}
	var epoch int32
	hb := func(re *string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "fickle", "m1", epoch
		r.RebalanceTimeoutMillis, r.SubscribedTopicRegex = -1, re
		if epoch == 0 {
			r.RebalanceTimeoutMillis, r.Topics = 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp := e.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat: code %d", resp.ErrorCode)
		}
		epoch = resp.MemberEpoch
		return resp
	}
	hb(regex(0))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no matching started")
	}
	// While the first matching is held, the member changes its regex
	// four times: the last one is the only one in use.
	for k := 1; k <= 4; k++ {
		hb(regex(k))
	}
	close(release)
	testwait.For(t, 10*time.Second, "the last regex's topics reach the member", func() bool {
		r := hb(nil)
		return r.Assignment != nil && len(r.Assignment.Topics) == 200
	})
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d matchings ran, want 2: the one under way and the last regex's", n)
	}
}

// A partition's matching waits for the node's one regex slot (its turn on
// the regex runner), behind the matchings of other partitions (seconds each
// for a long regex over many topics). If its regex is no longer wanted when
// the slot comes (its member changed it or left), it is dropped then, as
// queued ones are, and the partition's next wanted matching takes the slot
// instead: it ran anyway, holding the slot for nothing while every other
// group's regexes waited, and the member's current regex waited behind it.
func TestStaleRegexMatchingDroppedWhenTheSlotComes(t *testing.T) {
	var runs atomic.Int32
	started, release := make(chan struct{}, 1), make(chan struct{})
	e := newRegexEnvN(t, 2, func() {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
	})
	if PartitionFor("busy", 2) == PartitionFor("fickle", 2) {
		t.Fatal("the two groups must be on different partitions")
	}
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("zq%03dk", i)
	}
	regex := func(k int) *string { // each over the shard's budget, 200 topics
		r := fmt.Sprintf("service-0%d.*|", k) + strings.Join(words, "|")
		return &r
	}
	epochs := map[string]int32{}
	hb := func(g string, re *string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, g, "m1", epochs[g]
		r.RebalanceTimeoutMillis, r.SubscribedTopicRegex = -1, re
		if epochs[g] == 0 {
			r.RebalanceTimeoutMillis, r.Topics = 60000, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp := e.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s: code %d", g, resp.ErrorCode)
		}
		epochs[g] = resp.MemberEpoch
		return resp
	}
	// Another partition's matching holds the slot.
	hb("busy", regex(9))
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no matching started")
	}
	// This partition's first matching is taken from its queue and waits
	// for the slot; meanwhile the member changes its regex four times.
	for k := 0; k <= 4; k++ {
		hb("fickle", regex(k))
	}
	close(release)
	testwait.For(t, 10*time.Second, "the last regex's topics reach the member", func() bool {
		r := hb("fickle", nil)
		return r.Assignment != nil && len(r.Assignment.Topics) == 200
	})
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d matchings ran, want 2: the other partition's and the last regex's", n)
	}
}

// newRegexEnv starts a one-partition coordinator over 1,000 topics (service-
// 000 to -049, 20 each) whose regex matchings call gate before they run, and
// waits until it has loaded.
func newRegexEnv(t *testing.T, gate func()) *env { return newRegexEnvN(t, 1, gate) }

// newRegexEnvN is newRegexEnv with n partitions.
func newRegexEnvN(t *testing.T, n int, gate func()) *env {
	return newRegexEnvWith(t, n, func(c *Coordinator) {
		c.resolveGate = func(j group.RegexJob) {
			if !j.Started() { // once per matching, before its first slice
				gate()
			}
		}
	})
}

// newRegexEnvWith is newRegexEnvN with setup called on the coordinator
// before it starts, instead of a gate.
func newRegexEnvWith(t *testing.T, n int, setup func(c *Coordinator)) *env {
	t.Helper()
	cat := catalog.New(catalog.Options{})
	for i := range 1000 {
		if _, err := cat.Create(fmt.Sprintf("service-%03d.events.orders-%04d", i%50, i), 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	gcfg := group.Defaults()
	gcfg.InitialRebalanceDelay = 0
	gcfg.Topics = cat
	gcfg.ConsumerAssignmentInterval = 0 // targets at once: the fake clock stands still
	c, err := New(Config{Partitions: n, Group: gcfg, Store: memstore.New(),
		Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000)), Rand: seeded{rand.NewChaCha8([32]byte{7})}})
	if err != nil {
		t.Fatal(err)
	}
	setup(c)
	c.Start()
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, c: c}
}
