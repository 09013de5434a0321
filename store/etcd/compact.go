package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd keeps every revision of every key until it is told to compact its
// history; with no compaction set up on the etcd side (etcd's own default)
// every OffsetCommit of a cohort cluster adds to etcd's database until it
// reaches its quota (2 GiB by default), after which etcd refuses all writes
// and every cohort node stops. A Compactor keeps that history bounded, the
// way Kubernetes' API servers do for their etcd: at each interval one node
// of the cluster compacts the history up to the revision etcd was at one
// interval earlier, so watches that fall behind by less than an interval
// never miss an event (cohort's watches re-read everything when one does).
//
// The turn is taken with a compare-and-swap on one key (CompactionKey): each
// node remembers the key's version as it last saw it, and only the node
// whose write of the key succeeds compacts in that interval; the others
// learn the new version and the current revision, and try again at their
// next interval.

// CompactionKey is the key under prefix whose version counts the
// compactions of the cluster's history.
func CompactionKey(prefix string) string { return prefix + "compaction" }

// Compactor compacts etcd's history for one node; see above. Its methods
// are not safe for concurrent use.
type Compactor struct {
	cli *clientv3.Client
	key string
	// version is the CompactionKey's version as this node last saw it,
	// rev the revision etcd was at then (0: none seen yet).
	version, rev int64
}

// NewCompactor returns a compactor of the etcd behind cli for the cohort
// cluster under prefix (DefaultPrefix if empty).
func NewCompactor(cli *clientv3.Client, prefix string) *Compactor {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Compactor{cli: cli, key: CompactionKey(prefix)}
}

// Step is one interval's turn: if no other node took a turn since this one
// last looked, it takes it and compacts etcd's history up to the revision
// of its previous look (none on its first). It returns the revision
// compacted to, 0 if it did not compact. History already compacted further
// by someone else is not an error.
func (c *Compactor) Step(ctx context.Context) (int64, error) {
	r, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Version(c.key), "=", c.version)).
		Then(clientv3.OpPut(c.key, "")).
		Else(clientv3.OpGet(c.key)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("taking the turn to compact etcd's history: %w", err)
	}
	prev := c.rev
	c.rev = r.Header.Revision
	if !r.Succeeded {
		c.version = 0
		if kvs := r.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			c.version = kvs[0].Version
		}
		return 0, nil
	}
	c.version++
	if prev == 0 {
		return 0, nil
	}
	if _, err := c.cli.Compact(ctx, prev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("compacting etcd's history to revision %d: %w", prev, err)
	}
	return prev, nil
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

// Run calls Step every interval until ctx ends, logging what it does and
// telling observe (if not nil) the result of each compaction: "compacted",
// "failed", or "denied" once if etcd does not let the node compact
// (ErrCompactDenied), after which it returns.
func (c *Compactor) Run(ctx context.Context, interval time.Duration, log *slog.Logger, observe func(result string)) {
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
		// A full interval from the end of this step, which recorded the
		// revision the next one compacts to: at least an interval of
		// history is kept however long a step takes.
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
