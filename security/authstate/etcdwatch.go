package authstate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cohort-dev/cohort/internal/etcdwatch"
)

// rewatchPause is how long Watch waits after a broken watch before it
// re-reads and watches again.
const rewatchPause = time.Second

// reloadTimeout bounds one re-read of the state.
const reloadTimeout = 10 * time.Second

// Watch keeps s up to date with the records under prefix (the etcd keys of
// Partition, st.RecordKey(Partition, nil)) until ctx is done: each record
// etcd reports changed (by any node) is read again and applied (State.Sync).
//
// It learns etcd's current revision, re-reads the whole state (Reload),
// then watches from the next revision, so that nothing written between the
// node's load and the watch is missed (changes that the re-read already
// saw are applied again, which changes nothing). When the watch breaks
// (etcd unreachable, leader lost, history compacted) it pauses and starts
// over the same way.
//
// observe, when not nil, is told how the watch goes: nil each time the
// state has been read again and is being watched, the error each time that
// fails or the watch breaks (the node then keeps the users and ACLs it read
// last). A node's metrics show with it whether its security state still
// follows etcd, which a valid lease alone does not tell.
func Watch(ctx context.Context, cli *clientv3.Client, prefix string, s *State, log *slog.Logger, observe func(error)) {
	if log == nil {
		log = slog.Default()
	}
	if observe == nil {
		observe = func(error) {}
	}
	for {
		if err := watchOnce(ctx, cli, prefix, s, observe); ctx.Err() == nil {
			if err == nil {
				err = errors.New("watch ended")
			}
			observe(err)
			log.Warn("authstate: watching credential and ACL changes in etcd; retrying", "err", err)
		}
		t := time.NewTimer(rewatchPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchOnce re-reads the state and applies changes until the watch ends;
// it returns why it ended. It calls observe(nil) once the state is read.
func watchOnce(ctx context.Context, cli *clientv3.Client, prefix string, s *State, observe func(error)) error {
	rctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	resp, err := cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil {
		err = s.Reload(rctx)
	}
	cancel()
	if err != nil {
		return err
	}
	observe(nil)
	wctx, stop := context.WithCancel(etcdwatch.Context(ctx))
	defer stop()
	// reader returns the read of one Sync: its first Get is a linearizable
	// read of etcd's latest revision, and the others read that same
	// revision, so that the records applied together are as etcd held them
	// at one moment, never a mix of two changes.
	reader := func() func(key []byte) ([]byte, error) {
		var rev int64
		return func(key []byte) ([]byte, error) {
			gctx, cancel := context.WithTimeout(ctx, reloadTimeout)
			defer cancel()
			var opts []clientv3.OpOption
			if rev != 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			r, err := cli.Get(gctx, prefix+string(key), opts...)
			if err != nil {
				return nil, err
			}
			if rev == 0 {
				rev = r.Header.Revision
			}
			if len(r.Kvs) == 0 {
				return nil, nil
			}
			return r.Kvs[0].Value, nil
		}
	}
	for wr := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		// An event says which record changed, not what it holds now: read
		// it again (State.Sync). Many at once (a large CreateAcls): read
		// everything once.
		var keys [][]byte
		seen := map[string]bool{}
		for _, ev := range wr.Events {
			key := bytes.TrimPrefix(ev.Kv.Key, []byte(prefix))
			if !seen[string(key)] {
				seen[string(key)] = true
				keys = append(keys, key)
			}
		}
		var err error
		if len(keys) > maxKeyReads {
			rctx, cancel := context.WithTimeout(ctx, reloadTimeout)
			err = s.Reload(rctx)
			cancel()
		} else {
			err = s.Sync(keys, reader())
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// maxKeyReads is the most records of one watch answer read one by one;
// beyond it the whole state is read again.
const maxKeyReads = 32
