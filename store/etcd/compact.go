package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/internal/clock"
)

// etcd keeps every revision of every key until it is told to compact its
// history; with no compaction set up on the etcd side (etcd's own default)
// every OffsetCommit of a cohort cluster adds to etcd's database until it
// reaches its quota (2 GiB by default), after which etcd refuses all writes
// and every cohort node stops. A Compactor keeps that history bounded, the
// way Kubernetes' API servers do for their etcd: at each interval one node
// of the cluster compacts the history up to a revision etcd had reached at
// least one interval earlier, so watches that fall behind by less than an
// interval never miss an event (cohort's watches re-read everything when
// one does).
//
// What a turn needs is kept in etcd, in one key (CompactionKey), not in the
// node's memory: the time of the last turn, by the clock of the node that
// took it, and the revision etcd had reached when that node read the key,
// just before it read its clock. So whichever node steps next, a node that
// has just started included, knows whether the last turn is an interval old,
// whether the node that took it still runs or not: a cluster whose nodes all
// restart more often than the interval still compacts.
//
// A step reads the key. If its time is at least an interval old, the node
// takes the turn with a compare-and-swap on the key's modification revision,
// writing its own time and the revision of its read, and, if the write
// succeeds, compacts to the revision the key held: that revision was reached
// before the time stored with it, which is an interval ago or more, so every
// revision etcd reached since the last interval began is kept. Of nodes
// stepping at once, one write succeeds; the others see the new time at their
// next step. A key that is absent, empty (written by an older cohort, which
// keeps no time there) or not understood is only stamped with a turn that
// compacts nothing: the first compaction follows one interval later.
//
// The guarantee takes the nodes' clocks to agree to well within an interval
// (NTP does). A stored time more than an interval ahead of the stepping
// node's clock is stamped over, so one node's clock set far ahead cannot
// stall compaction for longer than an interval.

// CompactionKey is the key under prefix that records the last turn to
// compact the cluster's etcd history.
func CompactionKey(prefix string) string { return prefix + "compaction" }

// compactionTurn is CompactionKey's value (JSON).
type compactionTurn struct {
	// Time is when the turn was taken, by the clock of the node that took it.
	Time time.Time `json:"time"`
	// Revision is etcd's revision as read just before Time: the next turn
	// compacts to it.
	Revision int64 `json:"revision"`
}

// Compactor compacts etcd's history for one node; see above. Its methods
// are not safe for concurrent use.
type Compactor struct {
	cli      *clientv3.Client
	key      string
	interval time.Duration
	clk      clock.Clock
	// due is when, by clk, the next turn is due as of the last Step (zero:
	// not known); skew, if not zero, how far ahead of clk the time of the
	// turn the last Step stamped over was.
	due  time.Time
	skew time.Duration
}

// NewCompactor returns a compactor of the etcd behind cli for the cohort
// cluster under prefix (DefaultPrefix if empty), compacting once per
// interval (positive), telling the time by clk (nil: the wall clock).
func NewCompactor(cli *clientv3.Client, prefix string, interval time.Duration, clk clock.Clock) *Compactor {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if clk == nil {
		clk = clock.Real{}
	}
	return &Compactor{cli: cli, key: CompactionKey(prefix), interval: interval, clk: clk}
}

// Due is when, by the compactor's clock, the next turn is due as the last
// Step saw it; zero before a Step, or after one that failed.
func (c *Compactor) Due() time.Time { return c.due }

// Step takes the turn if the last one, whoever took it, is at least an
// interval old, and compacts etcd's history up to the revision recorded
// with it. It returns the revision compacted to, 0 if it did not compact.
// History already compacted further by someone else is not an error.
func (c *Compactor) Step(ctx context.Context) (int64, error) {
	c.due, c.skew = time.Time{}, 0
	g, err := c.cli.Get(ctx, c.key)
	if err != nil {
		return 0, fmt.Errorf("reading the last turn to compact etcd's history: %w", err)
	}
	// Read after the Get returned: etcd had reached read by then.
	now, read := c.clk.Now(), g.Header.Revision
	var modRev, to int64
	var last compactionTurn
	known := false
	if len(g.Kvs) > 0 {
		modRev = g.Kvs[0].ModRevision
		known = json.Unmarshal(g.Kvs[0].Value, &last) == nil && !last.Time.IsZero() &&
			last.Revision > 0 && last.Revision <= read // more: an etcd restored from an older backup
	}
	switch {
	case !known: // stamp it: the next turn, an interval on, compacts
	case now.Sub(last.Time) >= c.interval:
		to = last.Revision
	case last.Time.Sub(now) > c.interval:
		c.skew = last.Time.Sub(now)
	default:
		c.due = last.Time.Add(c.interval)
		return 0, nil
	}
	val, err := json.Marshal(compactionTurn{Time: now.UTC(), Revision: read})
	if err != nil {
		return 0, fmt.Errorf("taking the turn to compact etcd's history: %w", err)
	}
	r, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(c.key), "=", modRev)).
		Then(clientv3.OpPut(c.key, string(val))).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("taking the turn to compact etcd's history: %w", err)
	}
	// Taken by this node or, since the read, by another: either way the
	// next one is an interval from about now.
	c.due = now.Add(c.interval)
	if !r.Succeeded || to == 0 {
		return 0, nil
	}
	if _, err := c.cli.Compact(ctx, to); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("compacting etcd's history to revision %d: %w", to, err)
	}
	return to, nil
}

// ErrCompactDenied is returned by Allowed when etcd has authentication
// enabled and the node's etcd user is not root, the only user etcd lets
// compact.
var ErrCompactDenied = errors.New("etcd lets only its root user compact its history")

// Allowed finds out whether etcd lets this node compact, by compacting to
// revision 1 (nothing, or an error saying it is compacted already).
func (c *Compactor) Allowed(ctx context.Context) error {
	_, err := c.cli.Compact(ctx, 1)
	switch {
	case err == nil, errors.Is(err, rpctypes.ErrCompacted):
		return nil
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("%w: %w", ErrCompactDenied, err)
	}
	return err
}

// Run calls Step until ctx ends, at once and then each time the next turn
// is due (at most an interval apart), logging what it does and telling
// observe (if not nil) the result of each compaction: "compacted",
// "failed", or "denied" once if etcd does not let the node compact
// (ErrCompactDenied), after which it returns.
func (c *Compactor) Run(ctx context.Context, log *slog.Logger, observe func(result string)) {
	if observe == nil {
		observe = func(string) {}
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	err := c.Allowed(actx)
	cancel()
	if errors.Is(err, ErrCompactDenied) {
		observe("denied")
		log.Warn("cluster: this node's etcd user may not compact etcd's history: make sure etcd compacts it itself (etcd --auto-compaction-retention), or its database grows until its quota stops every write; --etcd-compaction-interval 0 silences this", "err", err)
		return
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		rev, err := c.Step(sctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			observe("failed")
			log.Warn("cluster: compacting etcd's history failed; it grows until etcd compacts it itself (etcd --auto-compaction-retention) or this succeeds", "err", err)
		case rev > 0:
			observe("compacted")
			log.Debug("cluster: compacted etcd's history", "revision", rev)
		}
		if c.skew > 0 {
			log.Warn("cluster: the last turn to compact etcd's history was stamped with a time ahead of this node's clock by more than --etcd-compaction-interval; this node stamped it anew: check the nodes' clocks (compaction keeps one interval of history only while they agree)", "ahead", c.skew)
		}
		t := c.clk.NewTimer(c.wait())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// wait is how long Run waits for its next Step: until the turn is due as
// the last Step saw it, an interval after a failed one, and never more than
// an interval, nor less than a second (or the interval if shorter).
func (c *Compactor) wait() time.Duration {
	w := c.interval
	if !c.due.IsZero() {
		w = min(w, c.due.Sub(c.clk.Now()))
	}
	return max(w, min(c.interval, time.Second))
}
