// Package etcdwatch gives each of cohort's etcd watches a stream of its own.
//
// The etcd client carries every watch whose context has the same outgoing
// gRPC metadata on one shared stream, and it attaches the auth token to a
// stream once, when it opens it. etcd checks that token when a watch is
// added to the stream, not for the events of watches already on it. With
// etcd's authentication on (--etcd-user), a stream outlives its token (etcd
// forgets a token unused for --auth-token-ttl, 5 minutes by default, and
// every token when it restarts or turns authentication off and on): the
// watches on it go on, but every watch added to it is refused with "invalid
// auth token", however often it is tried, for as long as one of the others
// keeps the stream open. A node that set one of its watches up again (a new
// lease, a broken catalog watch) then never got it back, and the cluster's
// watch loop read its state again and again without pause (some 3,000 etcd
// reads a second from one idle node; cluster's
// TestEtcdWatchAfterTokensDropped shows the refused watch).
//
// Context marks each watch's context with metadata of its own, so that the
// etcd client opens a new stream for it, logging in again if its token is no
// longer valid, and closes that stream when the watch ends.
package etcdwatch

import (
	"context"
	"strconv"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

var next atomic.Uint64

// Context is ctx for one watch (or a few set up and ended together): it
// requires a leader (clientv3.WithRequireLeader, so that a member cut off
// from the others ends it) and gets an etcd stream of its own.
func Context(ctx context.Context) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, "cohort-watch", strconv.FormatUint(next.Add(1), 10))
	return clientv3.WithRequireLeader(ctx)
}
