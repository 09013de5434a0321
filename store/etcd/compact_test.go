package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cohort-dev/cohort/internal/clock"
	"github.com/cohort-dev/cohort/internal/testwait"
	etcdstore "github.com/cohort-dev/cohort/store/etcd"
	"github.com/cohort-dev/cohort/store/etcd/etcdtest"
)

// interval is the compaction interval of these tests: they run on a fake
// clock, so it can be the default.
const interval = 5 * time.Minute

// timeline writes to etcd and records, on a fake clock, which revision etcd
// had reached at which time, to tell whether a compaction kept one interval
// of history.
type timeline struct {
	t     *testing.T
	ctx   context.Context
	cli   *clientv3.Client
	clk   *clock.Fake
	times []time.Time
	revs  []int64
}

func newTimeline(t *testing.T) *timeline {
	ec := etcdtest.Start(t, 1)
	return &timeline{t: t, ctx: context.Background(), cli: ec.Client(t), clk: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
}

// put writes a key and returns its revision.
func (h *timeline) put() int64 {
	h.t.Helper()
	r, err := h.cli.Put(h.ctx, "/cohort/dx", "v")
	if err != nil {
		h.t.Fatal(err)
	}
	h.note(r.Header.Revision)
	return r.Header.Revision
}

// note records that etcd had reached rev (0: its current revision) now.
func (h *timeline) note(rev int64) {
	h.t.Helper()
	if rev == 0 {
		r, err := h.cli.Get(h.ctx, "/cohort/dx")
		if err != nil {
			h.t.Fatal(err)
		}
		rev = r.Header.Revision
	}
	h.times, h.revs = append(h.times, h.clk.Now()), append(h.revs, rev)
}

// newest is the newest revision compaction may go up to now: the revision
// etcd had reached an interval ago (0: none yet).
func (h *timeline) newest() int64 {
	limit, newest := h.clk.Now().Add(-interval), int64(0)
	for i, at := range h.times {
		if !at.After(limit) {
			newest = max(newest, h.revs[i])
		}
	}
	return newest
}

func (h *timeline) readable(rev int64) bool {
	h.t.Helper()
	_, err := h.cli.Get(h.ctx, "/cohort/dx", clientv3.WithRev(rev))
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		h.t.Fatal(err)
	}
	return err == nil
}

func (h *timeline) compactor() *etcdstore.Compactor {
	return etcdstore.NewCompactor(h.cli, "", interval, h.clk)
}

// step steps c and checks that what it compacted to, if anything, leaves
// every revision of the last interval readable.
func (h *timeline) step(c *etcdstore.Compactor) int64 {
	h.t.Helper()
	rev, err := c.Step(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if newest := h.newest(); rev > newest {
		h.t.Fatalf("compacted to %d at %s, past %d, the revision of one interval earlier", rev, h.clk.Now().Format(time.TimeOnly), newest)
	}
	h.note(0)
	return rev
}

// TestCompactorAcrossRestarts: nodes that each step once and restart (a
// fresh Compactor each time, as after a restart), an interval and a bit
// apart, compact etcd's history at every step but the first: the turn's
// time and revision are kept in etcd, not in a node's memory.
func TestCompactorAcrossRestarts(t *testing.T) {
	h := newTimeline(t)
	const restarts = 6
	compactions := 0
	var first, last int64
	for i := range restarts {
		written := h.put()
		if i == 0 {
			first = written
		}
		if rev := h.step(h.compactor()); rev > 0 {
			compactions++
			if last = rev; h.readable(rev-1) || !h.readable(rev) || !h.readable(written) {
				t.Fatalf("restart %d compacted to %d: revision %d readable %v, %d readable %v, want false, true", i, rev, rev-1, h.readable(rev-1), written, h.readable(written))
			}
		}
		h.clk.Advance(interval + time.Second)
	}
	if compactions != restarts-1 {
		t.Fatalf("after %d restarts, each an interval after the last, compacted %d times, want %d", restarts, compactions, restarts-1)
	}
	if h.readable(first) || last <= first {
		t.Fatalf("the first revision written (%d) is still readable; compacted last to %d", first, last)
	}
}

// TestCompactorKeepsOneInterval: two nodes' compactors, stepped at the same
// times every third of an interval, compact etcd's history once per
// interval between them, never to a revision of the last interval; Due
// says when the next turn is.
func TestCompactorKeepsOneInterval(t *testing.T) {
	h := newTimeline(t)
	a, b := h.compactor(), h.compactor()
	const steps = 30
	var compactedAt []time.Time
	for i := range steps {
		h.put()
		first, second := a, b
		if i%2 == 1 {
			first, second = b, a
		}
		n := 0
		for _, c := range []*etcdstore.Compactor{first, second} {
			if h.step(c) > 0 {
				n++
			}
			if due := c.Due(); due.Before(h.clk.Now()) || due.After(h.clk.Now().Add(interval)) {
				t.Fatalf("step %d: next turn due at %s, want within an interval of %s", i, due.Format(time.TimeOnly), h.clk.Now().Format(time.TimeOnly))
			}
		}
		if n > 0 {
			if n > 1 {
				t.Fatalf("step %d: both nodes compacted", i)
			}
			if k := len(compactedAt); k > 0 && h.clk.Now().Sub(compactedAt[k-1]) < interval {
				t.Fatalf("step %d: compacted %s after the last compaction, less than an interval", i, h.clk.Now().Sub(compactedAt[k-1]))
			}
			compactedAt = append(compactedAt, h.clk.Now())
		}
		h.clk.Advance(interval / 3)
	}
	// The first step stamps the turn; then every third step is an
	// interval later.
	if len(compactedAt) != (steps-1)/3 {
		t.Fatalf("compacted %d times in %d intervals, want %d", len(compactedAt), steps/3, (steps-1)/3)
	}
}

// TestCompactorConcurrentTurns: two nodes stepping at the very same moment
// (the compare-and-swap decides) compact once per interval.
func TestCompactorConcurrentTurns(t *testing.T) {
	h := newTimeline(t)
	cs := []*etcdstore.Compactor{h.compactor(), h.compactor()}
	for round := range 5 {
		h.put()
		revs := make([]int64, len(cs))
		errs := make([]error, len(cs))
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() { revs[i], errs[i] = c.Step(h.ctx) })
		}
		wg.Wait()
		n := 0
		for i := range cs {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if revs[i] > 0 {
				n++
			}
		}
		if want := min(round, 1); n != want {
			t.Fatalf("round %d: %d nodes compacted (%v), want %d", round, n, revs, want)
		}
		h.clk.Advance(interval)
	}
}

// TestCompactorOlderOrOddValues: a compaction key as an older cohort leaves
// it (empty), one not understood, one naming a revision etcd has not
// reached (etcd restored from a backup) or a time more than an interval
// ahead of this node's clock: the step takes a turn that compacts nothing
// and stamps its own time, and the turn an interval later compacts.
func TestCompactorOlderOrOddValues(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"empty", ""},
		{"not JSON", "v2:whatever"},
		{"future revision", `{"time":"2026-03-01T11:00:00Z","revision":999999}`},
		{"clock far ahead", `{"time":"2026-03-01T12:10:01Z","revision":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTimeline(t)
			h.put()
			if _, err := h.cli.Put(h.ctx, etcdstore.CompactionKey(etcdstore.DefaultPrefix), tc.value); err != nil {
				t.Fatal(err)
			}
			h.note(0)
			c := h.compactor()
			if rev := h.step(c); rev != 0 {
				t.Fatalf("compacted to %d at the first step", rev)
			}
			if due := c.Due(); !due.Equal(h.clk.Now().Add(interval)) {
				t.Fatalf("next turn due at %s, want an interval from now", due)
			}
			h.clk.Advance(interval - time.Second)
			h.put()
			if rev := h.step(h.compactor()); rev != 0 {
				t.Fatalf("compacted to %d before an interval passed", rev)
			}
			h.clk.Advance(time.Second)
			if rev := h.step(h.compactor()); rev == 0 {
				t.Fatal("did not compact an interval after the stamped turn")
			}
		})
	}
}

// TestCompactorRunCompactsAtStart: a node whose last turn (its own, before
// it restarted) is an interval old compacts as soon as it starts, then
// waits for the next turn.
func TestCompactorRunCompactsAtStart(t *testing.T) {
	h := newTimeline(t)
	h.put()
	results := make(chan string, 10)
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(h.ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.compactor().Run(ctx, slog.New(slog.DiscardHandler), func(r string) { results <- r })
		}()
		return func() { cancel(); <-done }
	}
	armed := func() time.Time {
		t.Helper()
		var at time.Time
		testwait.For(t, 10*time.Second, "Run waiting for its next step", func() bool {
			var ok bool
			at, ok = h.clk.NextDeadline()
			return ok
		})
		return at
	}
	stop := run()
	if at := armed(); !at.Equal(h.clk.Now().Add(interval)) {
		t.Fatalf("first run waits until %s, want an interval", at)
	}
	stop()
	h.clk.Advance(interval)
	stop = run()
	defer stop()
	select {
	case r := <-results:
		if r != "compacted" {
			t.Fatalf("restarted node's first step: %q", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("restarted node did not compact at start")
	}
	if at := armed(); !at.Equal(h.clk.Now().Add(interval)) {
		t.Fatalf("after compacting, waits until %s, want an interval", at)
	}
}

// TestCompactorAllowed: without authentication etcd lets anyone compact;
// with it, only root (cohort's user, read-write on its prefix, may not).
func TestCompactorAllowed(t *testing.T) {
	ec := etcdtest.Start(t, 1)
	ctx := context.Background()
	if err := etcdstore.NewCompactor(ec.Client(t), "", interval, nil).Allowed(ctx); err != nil {
		t.Fatalf("without authentication: %v", err)
	}
	ec.EnableAuth(t, "root-pass", "/cohort/", map[string]string{"cohort": "pw"})
	user, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints(), Username: "cohort", Password: "pw", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if err := etcdstore.NewCompactor(user, "", interval, nil).Allowed(ctx); !errors.Is(err, etcdstore.ErrCompactDenied) {
		t.Fatalf("a user with read-write on its prefix: %v, want ErrCompactDenied", err)
	}
}

// olderNode takes compaction turns as cohort did before the turn's time was
// kept in etcd: it remembers the key's version and etcd's revision from its
// previous step, and when no one wrote the key since, writes it empty and
// compacts to that revision.
type olderNode struct {
	h            *timeline
	version, rev int64
}

func (o *olderNode) step() int64 {
	h := o.h
	h.t.Helper()
	key := etcdstore.CompactionKey(etcdstore.DefaultPrefix)
	r, err := h.cli.Txn(h.ctx).If(clientv3.Compare(clientv3.Version(key), "=", o.version)).
		Then(clientv3.OpPut(key, "")).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		h.t.Fatal(err)
	}
	prev := o.rev
	o.rev = r.Header.Revision
	if !r.Succeeded {
		o.version = 0
		if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			o.version = kvs[0].Version
		}
		return 0
	}
	if o.version++; prev == 0 {
		return 0
	}
	if _, err := h.cli.Compact(h.ctx, prev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		h.t.Fatal(err)
	}
	return prev
}

// TestCompactorMixedVersions: during a rolling upgrade a node of the older
// version (stepping every interval, alone at first, so the key holds its
// empty value) and, from the third interval on, a newer one (stepping every
// third of an interval, restarted each time) share the key: compactions stay
// an interval apart, never reach into the last interval, and go on.
func TestCompactorMixedVersions(t *testing.T) {
	h := newTimeline(t)
	old := &olderNode{h: h}
	var compactedAt []time.Time
	byOlder := 0
	const steps = 36
	for i := range steps {
		h.put()
		n := 0
		if i%3 == 0 {
			rev := old.step()
			if newest := h.newest(); rev > newest {
				t.Fatalf("step %d: the older node compacted to %d, past %d", i, rev, newest)
			}
			h.note(0)
			if rev > 0 {
				n++
				byOlder++
			}
		}
		if i >= 8 && h.step(h.compactor()) > 0 {
			n++
		}
		if n > 0 {
			if k := len(compactedAt); n > 1 || k > 0 && h.clk.Now().Sub(compactedAt[k-1]) < interval {
				t.Fatalf("step %d: %d compactions, the one before at %v", i, n, compactedAt)
			}
			compactedAt = append(compactedAt, h.clk.Now())
		}
		h.clk.Advance(interval / 3)
	}
	// The older node compacts at its second and third steps; the newer
	// one stamps the empty key when it starts, and compacts an interval on.
	if byOlder < 2 || len(compactedAt) < steps/3-2 {
		t.Fatalf("compacted at %v, %d by the older node, in %d intervals", compactedAt, byOlder, steps/3)
	}
	t.Logf("compacted at %v, %d by the older node", compactedAt, byOlder)
}
